/* Log templates (_templates.Template), a batch at a time. */
#ifndef BOUNDLOG_TEMPLATE_H
#define BOUNDLOG_TEMPLATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* format_template(records, ops, pid) -> bytes | None
 *
 * `ops` is the template compiled once by Template.__init__ (Template._ops): a tuple
 * of (code, number, object) tuples, walked in order for each record, each appending
 * one piece of its line.  The codes, and what `number` and `object` are for each, are
 * the enum in template.c (the order of _templates._C_OPS).  `pid` is os.getpid(),
 * read by the caller per batch: it changes in a forked child.
 *
 * None means "not handled here": a record holds a value of a type this code does not
 * read, an integer past 64 bits, a time or duration Python would raise for, or a clock
 * or the user-name function raised; the caller then formats the batch with the
 * pure-Python core, which is the reference. */
PyObject *template_format_template(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
