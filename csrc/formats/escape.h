/* The two escaping rules of client bytes, in C.
 *
 * The log-line rule of formats/_escape.py: every byte a client controls is written as itself
 * when it is printable ASCII other than '"' and '\\', and as \xhh (lower-case hex)
 * otherwise; in the unquoted client field a space is escaped too.
 *
 * The JSON string rule of formats/_json.py (_json_string): see escape_json_write. */
#ifndef BOUNDLOG_ESCAPE_H
#define BOUNDLOG_ESCAPE_H

#include "common/buffer.h"

typedef enum { ESCAPE_QUOTED = 0, ESCAPE_UNQUOTED = 1 } EscapeMode;

/* Appends `bytes` escaped; 0, or -1 with MemoryError set. */
int escape_write(Buffer *buffer, const char *bytes, Py_ssize_t size, EscapeMode mode);

/* Appends a str field's UTF-8 bytes (surrogatepass, text.h) escaped, as
 * escape(_columns._text(text)) gives them; 0, or -1 with an exception set. */
int escape_text_write(Buffer *buffer, PyObject *text, EscapeMode mode);

/* Appends `bytes` as a JSON string, quotes included, exactly as _json._json_string:
 * valid UTF-8 is the text it encodes, and bytes that are not valid UTF-8 (as Python's
 * strict decoder judges: no surrogates, no overlong forms) have each byte from 0x80 on
 * written as the text \xhh; in both, a backslash is the text \x5c.  That text is then
 * written as json.encoder.encode_basestring_ascii writes it (ASCII only: \" \\ \b \f \n
 * \r \t, \u00hh for other controls and DEL, \uhhhh and surrogate pairs above ASCII).
 * 0, or -1 with MemoryError set. */
int escape_json_write(Buffer *buffer, const char *bytes, Py_ssize_t size);

/* Appends a str's UTF-8 bytes (surrogatepass, text.h) as a JSON string, as
 * _json._json_text writes a str; 0, or -1 with an exception set. */
int escape_json_text_write(Buffer *buffer, PyObject *text);

#endif
