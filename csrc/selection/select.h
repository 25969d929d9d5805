/* The writer's per-record scans before formatting (_filters.Select and
 * _redaction.QueryRedaction), a batch at a time. */
#ifndef BOUNDLOG_SELECT_H
#define BOUNDLOG_SELECT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* select_records(batch, skip_paths, path_prefixes, skip_path_errors, skip_status,
 *                min_duration) -> list | None
 *
 * The records of `batch` (a list) that Select's cheap filters keep, in order: the path
 * is neither in `skip_paths` (a frozenset of bytes) nor starts with one of
 * `path_prefixes` (a tuple of bytes), or the status is 400 or more and
 * `skip_path_errors` is False; the status is not in `skip_status` (a frozenset
 * of ints), and the duration is at least `min_duration` (0.0: no minimum); an empty
 * set or tuple filters nothing.  None for a batch with a record or field of a type
 * this code does not read: the caller filters it in Python, the reference. */
PyObject *select_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* joined_queries(batch) -> bytes | None
 *
 * b"&".join of the batch's non-empty queries, as QueryRedaction searches them, or None
 * for a query of another type than bytes (the caller joins in Python). */
PyObject *select_joined_queries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
