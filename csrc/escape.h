/* The escaping rule of _escape.py, in C: every byte a client controls is written as
 * itself when it is printable ASCII other than '"' and '\\', and as \xhh (lower-case
 * hex) otherwise; in the unquoted client field a space is escaped too. */
#ifndef BOUNDLOG_ESCAPE_H
#define BOUNDLOG_ESCAPE_H

#include "buffer.h"

typedef enum { ESCAPE_QUOTED = 0, ESCAPE_UNQUOTED = 1 } EscapeMode;

/* Appends `bytes` escaped; 0, or -1 with MemoryError set. */
int escape_write(Buffer *buffer, const char *bytes, Py_ssize_t size, EscapeMode mode);

#endif
