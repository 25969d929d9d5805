/* One request or response header field of a record, found as _headers.HeaderReader
 * finds it. */
#ifndef BOUNDLOG_HEADERS_H
#define BOUNDLOG_HEADERS_H

#include "common/buffer.h"
#include "record/packed.h"

/* What a lookup returns besides 0 (written) and -1 (an exception is set). */
#define HEADERS_UNSUPPORTED 1
#define HEADERS_ABSENT 2

/* Writes the bytes of one value (a format's rule: escaped, or as they are). */
typedef int (*HeaderValueWriter)(Buffer *buffer, const char *bytes, Py_ssize_t size);

/* Appends the value of the field `name` (lower-case bytes) in `headers` through
 * `write`, a field sent more than once as its values joined with ", ", and returns 0;
 * or HEADERS_ABSENT, having written nothing.  `environ_key` (str) is the field's WSGI
 * environ key.
 *
 * Handled: a list or tuple of (name, value) 2-tuples whose names and matching values
 * are bytes or str (a str value is its latin-1 bytes when it has them, else UTF-8),
 * and a dict (a WSGI environ) whose value is bytes, str or None (absent).  Anything
 * else returns HEADERS_UNSUPPORTED, having written nothing, and the caller leaves the
 * batch to the pure-Python core: its behaviour is then the reference's, exceptions
 * included. */
int headers_find(Buffer *buffer, PyObject *headers, PyObject *name, PyObject *environ_key,
                 HeaderValueWriter write);

/* headers_find for a log line: the value escaped (escape.h), or "-" when absent. */
int headers_write(Buffer *buffer, PyObject *headers, PyObject *name, PyObject *environ_key);

/* headers_find for the request header fields of a Packed record (which are always of
 * a shape it reads: never HEADERS_UNSUPPORTED). */
int headers_find_packed(Buffer *buffer, Packed *packed, PyObject *name, PyObject *environ_key,
                        HeaderValueWriter write);

/* headers_write for the request header fields of a Packed record. */
int headers_write_packed(Buffer *buffer, Packed *packed, PyObject *name, PyObject *environ_key);

#endif
