/* The writer's per-record scans before formatting, byte for byte those of
 * _filters.Select (skip_paths, skip_path_errors, skip_status, min_duration) and of
 * the query join _redaction.QueryRedaction starts with.
 *
 * Both run for every record of every batch (query redaction is on by default), and in
 * Python each costs a comprehension step or two per record.  Only values of the types
 * integrations put in records are read here (bytes paths and queries, int statuses,
 * float durations); for anything else the batch goes back to the Python code, whose
 * comparisons (and errors) are the reference.  Nothing here calls into Python code:
 * hashing and comparing bytes and ints is the interpreter's own. */
#include "selection/select.h"

#include <string.h>

#include "common/buffer.h"
#include "common/compat.h"
#include "record/packed.h"
#include "record/record.h"

/* Leave the batch to Python. */
#define UNREAD 1

/* Whether `path` (bytes) starts with one of `prefixes` (a tuple of bytes). */
static int
has_prefix(PyObject *path, PyObject *prefixes)
{
    Py_ssize_t length = PyBytes_GET_SIZE(path);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(prefixes); i++) {
        PyObject *prefix = PyTuple_GET_ITEM(prefixes, i);
        Py_ssize_t size = PyBytes_GET_SIZE(prefix);
        if (size <= length && memcmp(PyBytes_AS_STRING(path), PyBytes_AS_STRING(prefix),
                                     (size_t)size) == 0) {
            return 1;
        }
    }
    return 0;
}

/* 1 if `status` is 400 or more, 0 if less, UNREAD + 1 for another type than int. */
static int
is_error(PyObject *status)
{
    if (!PyLong_CheckExact(status)) {
        return UNREAD + 1;
    }
    int overflow;
    long code = PyLong_AsLongAndOverflow(status, &overflow);
    /* An exact int cannot fail here; past a long, its sign decides. */
    return overflow != 0 ? overflow > 0 : code >= 400;
}

typedef struct {
    PyObject *skip_paths;    /* a frozenset, or NULL for none */
    PyObject *path_prefixes; /* a tuple, or NULL for none */
    int skip_path_errors;    /* 1: a skipped path's errors are skipped too */
    PyObject *skip_status;   /* a frozenset, or NULL for none */
    double min_duration;
} Filters;

/* 1 to keep `record`, 0 to skip it, UNREAD + 1 for a value this code does not read, -1
 * on error. */
static int
keeps(const Filters *filters, PyObject *record)
{
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != FIELDS) {
        return UNREAD + 1;
    }
    if (filters->skip_paths != NULL || filters->path_prefixes != NULL) {
        PyObject *path = PyTuple_GET_ITEM(record, PATH);
        if (!PyBytes_CheckExact(path)) {
            return UNREAD + 1;
        }
        int skipped = filters->skip_paths != NULL ? PySet_Contains(filters->skip_paths, path) : 0;
        if (skipped < 0) {
            return -1;
        }
        if (skipped == 0 && filters->path_prefixes != NULL) {
            skipped = has_prefix(path, filters->path_prefixes);
        }
        if (skipped) {
            if (filters->skip_path_errors) {
                return 0;
            }
            /* A skipped path's errors (status >= 400) are logged: they go on to the
             * other filters. */
            int error = is_error(PyTuple_GET_ITEM(record, STATUS));
            if (error != 1) {
                return error;
            }
        }
    }
    if (filters->skip_status != NULL) {
        PyObject *status = PyTuple_GET_ITEM(record, STATUS);
        if (!PyLong_CheckExact(status)) {
            return UNREAD + 1;
        }
        int skipped = PySet_Contains(filters->skip_status, status);
        if (skipped != 0) {
            return skipped < 0 ? -1 : 0;
        }
    }
    if (filters->min_duration != 0.0) {
        PyObject *duration = PyTuple_GET_ITEM(record, DURATION);
        if (!PyFloat_CheckExact(duration)) {
            return UNREAD + 1;
        }
        /* As Python's >=: NaN is never kept. */
        if (!(PyFloat_AS_DOUBLE(duration) >= filters->min_duration)) {
            return 0;
        }
    }
    return 1;
}

/* An empty frozenset or tuple filters nothing: NULL.  UNREAD for another type. */
static int
filter_set(PyObject *argument, PyObject **set)
{
    if (!PyFrozenSet_CheckExact(argument)) {
        return UNREAD;
    }
    *set = PySet_GET_SIZE(argument) > 0 ? argument : NULL;
    return 0;
}

static int
filter_prefixes(PyObject *argument, PyObject **prefixes)
{
    if (!PyTuple_CheckExact(argument)) {
        return UNREAD;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(argument); i++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(argument, i))) {
            return UNREAD;
        }
    }
    *prefixes = PyTuple_GET_SIZE(argument) > 0 ? argument : NULL;
    return 0;
}

PyObject *
select_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "select_records() takes 6 arguments");
        return NULL;
    }
    Filters filters;
    filters.min_duration = PyFloat_AsDouble(args[5]);
    if (filters.min_duration == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *batch = args[0];
    if (!PyList_CheckExact(batch) || filter_set(args[1], &filters.skip_paths) != 0
        || filter_prefixes(args[2], &filters.path_prefixes) != 0 || !PyBool_Check(args[3])
        || filter_set(args[4], &filters.skip_status) != 0) {
        Py_RETURN_NONE;
    }
    filters.skip_path_errors = args[3] == Py_True;
    PyObject *kept = PyList_New(0);
    if (kept == NULL) {
        return NULL;
    }
    PyObject *record;
    for (Py_ssize_t i = 0; (record = sequence_item_ref(batch, i)) != NULL; i++) {
        int keep = keeps(&filters, record);
        if (keep == 1 && PyList_Append(kept, record) < 0) {
            keep = -1;
        }
        Py_DECREF(record);
        if (keep < 0 || keep == UNREAD + 1) {
            Py_DECREF(kept);
            if (keep < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
    }
    return kept;
}

PyObject *
select_joined_queries(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "joined_queries() takes 1 argument");
        return NULL;
    }
    PyObject *batch = args[0];
    if (!PyList_CheckExact(batch)) {
        Py_RETURN_NONE;
    }
    Buffer buffer;
    if (buffer_init(&buffer, 64) < 0) {
        return NULL;
    }
    int rc = 0;
    int first = 1;
    PyObject *record;
    for (Py_ssize_t i = 0; rc == 0 && (record = sequence_item_ref(batch, i)) != NULL; i++) {
        if (packed_check(record)) {
            Py_ssize_t size;
            const char *query = packed_text((Packed *)record, PACKED_QUERY, &size);
            if (size > 0 && ((!first && buffer_write(&buffer, "&", 1) < 0)
                             || buffer_write(&buffer, query, size) < 0)) {
                rc = -1;
            }
            first = first && size == 0;
            Py_DECREF(record);
            continue;
        }
        PyObject *query = PyTuple_Check(record) && PyTuple_GET_SIZE(record) == FIELDS
                          ? PyTuple_GET_ITEM(record, QUERY) : NULL;
        if (query == NULL || !(query == Py_None || PyBytes_CheckExact(query))) {
            rc = UNREAD; /* the reference's filter(None, ...) and join decide */
        }
        else if (query != Py_None && PyBytes_GET_SIZE(query) > 0) {
            if ((!first && buffer_write(&buffer, "&", 1) < 0)
                || buffer_write(&buffer, PyBytes_AS_STRING(query), PyBytes_GET_SIZE(query)) < 0) {
                rc = -1;
            }
            first = 0;
        }
        Py_DECREF(record);
    }
    return buffer_result(&buffer, rc);
}
