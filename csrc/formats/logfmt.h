/* logfmt lines (_logfmt.LogfmtFormat): a JSON line's values, loosened into logfmt's.
 *
 * A logfmt line is written as a JSON line's walk writes its values (json.c), with
 * ` key=` before each; each value is then loosened in place by the rule of _logfmt's
 * docstring. */
#ifndef BOUNDLOG_LOGFMT_H
#define BOUNDLOG_LOGFMT_H

#include "common/buffer.h"

/* Loosens the JSON value written from buffer offset `value` to the end, the text
 * before it (its key) starting at `field`: null takes the pair out (the buffer is cut
 * back to `field`), a JSON string whose text is not empty and holds no space, '=' or
 * backslash loses its quotes, and anything else (a number, true, false, a string
 * that keeps its quotes) stays as it is.  A '"' within a JSON string is always
 * escaped, so a backslash finds it. */
void logfmt_loosen(Buffer *buffer, Py_ssize_t field, Py_ssize_t value);

/* Whether `key` (an exact str) is a logfmt key as it is: not empty, and printable
 * ASCII other than space, '=', '"' and backslash.  A note named otherwise is left to
 * the pure-Python core, which makes its name a key (_logfmt.logfmt_key). */
int logfmt_is_key(PyObject *key);

#endif
