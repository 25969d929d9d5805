/* The common and combined lines (_apache.ApacheFormat), a batch at a time. */
#ifndef BOUNDLOG_CLF_H
#define BOUNDLOG_CLF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* format_apache(records, clock, names, environ_keys) -> bytes | None
 *
 * `clock` is the format's ClfClock: clock(time) gives a record's stamp with the text
 * around it (b' - - [..] "').  `names` are the header fields shown after the status and
 * byte count (() for common, (b"referer", b"user-agent") for combined) and
 * `environ_keys` their WSGI environ keys.  None means "not handled here": a record
 * holds a value of a type this code does not read, or the clock raised; the caller
 * then formats the batch with the pure-Python core, which is the reference. */
PyObject *clf_format_apache(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
