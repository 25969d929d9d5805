/* The record of a WSGI request: _environ.environ_record in C, for the usual environ. */
#ifndef BOUNDLOG_ENVIRON_H
#define BOUNDLOG_ENVIRON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The environ's variables the record reads, interned in the module's state. */
enum { RAW_URI, REQUEST_URI, SCRIPT_NAME, PATH_INFO, QUERY_STRING, REMOTE_ADDR,
       REQUEST_METHOD, SERVER_PROTOCOL, ENVIRON_VARIABLES };

/* Interns the variables' names into `names`: 0, or -1 on error. */
int environ_names(PyObject **names);

/* environ_record(record_type, environ, received, duration, status, sent,
 *                request_headers, response_headers, bound, limit, notes)
 *     -> Record | None */
PyObject *environ_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
