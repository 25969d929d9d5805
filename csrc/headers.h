/* One request header field of a record, found as _headers.HeaderReader finds it. */
#ifndef BOUNDLOG_HEADERS_H
#define BOUNDLOG_HEADERS_H

#include "buffer.h"

/* What a lookup returns besides 0 (written) and -1 (an exception is set). */
#define HEADERS_UNSUPPORTED 1

/* Appends the value of the field `name` (lower-case bytes) in `headers`, escaped, or
 * "-" when it is absent.  `environ_key` (str) is the field's WSGI environ key.
 *
 * Handled: a list or tuple of (name, value) 2-tuples whose names and matching values
 * are bytes or str, and a dict (a WSGI environ) whose value is bytes, str or None.
 * Anything else returns HEADERS_UNSUPPORTED, having written nothing, and the caller
 * leaves the batch to the pure-Python core: its behaviour is then the reference's,
 * exceptions included. */
int headers_write(Buffer *buffer, PyObject *headers, PyObject *name, PyObject *environ_key);

#endif
