/* A record's Extras (_record.py) as the C request paths complete it: the request
 * body's bytes the application received, added to what the log's learner found, as
 * _extras.with_bytes_received adds them (tests/test_speedups_asgi.py and
 * test_speedups_wsgi.py compare the records of both). */
#ifndef BOUNDLOG_EXTRAS_H
#define BOUNDLOG_EXTRAS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The position of bytes_received in an Extras (_record.BYTES_RECEIVED). */
#define EXTRAS_BYTES_RECEIVED 3

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
