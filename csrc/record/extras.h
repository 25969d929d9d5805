/* A record's extras (_record.Extras): None, or a tuple of the fields below, in order.
 * The formats read them, and the values of a record's dicts of named values (its
 * notes, its extras' environ), with the functions of extras.c; the C request paths
 * complete them with the request body's bytes the application received, as
 * _extras.with_bytes_received does (tests/speedups/test_speedups_asgi.py and
 * test_speedups_wsgi.py compare the records of both). */
#ifndef BOUNDLOG_EXTRAS_H
#define BOUNDLOG_EXTRAS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { EXTRAS_ROUTE, EXTRAS_TRACE, EXTRAS_COMPLETED, EXTRAS_BYTES_RECEIVED, EXTRAS_CLOSE_CODE,
       EXTRAS_ENVIRON, EXTRAS_FIELDS };

/* The field `index` of the record's extras in *field, None when the record has none
 * (the reference's `None if extras is None else extras[index]`): borrowed from the
 * record, which the caller holds, and a tuple's items cannot change.  0, or
 * UNSUPPORTED (record.h) for extras that are not a tuple of EXTRAS_FIELDS items. */
int extras_field(PyObject *record, int index, PyObject **field);

/* The value of `name` (a str) in `values`, a record's dict of named values (its notes,
 * its extras' environ), as a strong reference in *value, or NULL when it holds none
 * (`values` None, or the name absent).  0, or UNSUPPORTED for `values` that are not an
 * exact dict (another mapping's lookup is Python code) or a lookup that raised. */
int extras_lookup(PyObject *values, PyObject *name, PyObject **value);

/* The value of the server variable `name` (a str) in the record's extras.environ, as
 * a strong reference in *value, or NULL when the environ holds none (no extras, an
 * environ of None or empty, the name absent).  0, or UNSUPPORTED for extras
 * extras_field refuses or an environ extras_lookup refuses. */
int extras_environ_value(PyObject *record, PyObject *name, PyObject **value);

/* The numbers of an extras.trace of the shape OpenTelemetry holds: an exact tuple of
 * two exact ints, the trace id below 2**128 and the span id below 2**64, neither
 * negative: 1 with the trace id's high and low 64 bits and the span id set, else 0
 * (no exception). */
int extras_trace_numbers(PyObject *trace, unsigned long long *high, unsigned long long *low,
                         unsigned long long *span);

/* Whether `no_extras` can stand for _extras.NO_EXTRAS: a tuple with the field. */
static inline int
extras_usable(PyObject *no_extras)
{
    return PyTuple_Check(no_extras) && PyTuple_GET_SIZE(no_extras) > EXTRAS_BYTES_RECEIVED;
}

/* `extras` (None: `no_extras`, those of a log that reads no other) with `received` as
 * its bytes_received: a new Extras, or NULL with an exception set.  tuple.__new__ for
 * the type, without the intermediate tuple; a learner gives an Extras or None, so
 * anything else is an error. */
static inline PyObject *
extras_with_bytes_received(PyObject *no_extras, PyObject *extras, PyObject *received)
{
    PyObject *base = extras == Py_None ? no_extras : extras;
    PyTypeObject *type = Py_TYPE(no_extras);
    if (!Py_IS_TYPE(base, type)) {
        PyErr_Format(PyExc_TypeError, "the extras learnt must be an Extras or None, not "
                                      "'%.100s'", Py_TYPE(base)->tp_name);
        return NULL;
    }
    Py_ssize_t size = PyTuple_GET_SIZE(base);
    PyObject *completed = type->tp_alloc(type, size);
    if (completed == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *field = i == EXTRAS_BYTES_RECEIVED ? received : PyTuple_GET_ITEM(base, i);
        PyTuple_SET_ITEM(completed, i, Py_NewRef(field));
    }
    return completed;
}

#endif
