/* Waiting for RELP's answers without the GIL: sinks/_relp.RelpSession's reads of the
 * plain answers a batch expects, in C.
 *
 * rsyslog writes each answer on its own and its Nagle algorithm holds the next until
 * the last is acknowledged, so a batch's answers come two or three a segment, each
 * segment waiting for an acknowledgement the reader's next read sends.  In Python each
 * of those reads gives up and takes back the GIL, which the event loop then has to
 * hand over: a hundred hand-offs a batch.  This reads them all in one call, the GIL
 * released throughout, and hands back what came; the parsing stays in Python. */
#ifndef BOUNDLOG_RELP_H
#define BOUNDLOG_RELP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* relp_await(fd, expected, timeout_ms) -> bytes */
PyObject *relp_await(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
