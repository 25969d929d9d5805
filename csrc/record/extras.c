/* Reading a record's extras (see extras.h). */
#include "record/extras.h"

#include "common/compat.h"
#include "record/record.h"

/* An exact int of 64 bits or fewer, not negative, as *number: 1, else 0 (no exception). */
static int
unsigned_64(PyObject *value, unsigned long long *number)
{
    if (!PyLong_CheckExact(value)) {
        return 0;
    }
    *number = PyLong_AsUnsignedLongLong(value); /* OverflowError when negative or larger */
    if (*number == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

int
extras_trace_numbers(PyObject *trace, unsigned long long *high, unsigned long long *low,
                     unsigned long long *span)
{
    if (!PyTuple_CheckExact(trace) || PyTuple_GET_SIZE(trace) != 2
        || !PyLong_CheckExact(PyTuple_GET_ITEM(trace, 0))
        || !unsigned_64(PyTuple_GET_ITEM(trace, 1), span)) {
        return 0;
    }
    /* A trace id is 128 bits: its high 64 (trace_id >> 64, negative for a negative id)
     * and its low 64. */
    PyObject *trace_id = PyTuple_GET_ITEM(trace, 0);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *upper = shift == NULL ? NULL : PyNumber_Rshift(trace_id, shift);
    Py_XDECREF(shift);
    if (upper == NULL) {
        PyErr_Clear();
        return 0;
    }
    int fits = unsigned_64(upper, high);
    Py_DECREF(upper);
    *low = PyLong_AsUnsignedLongLongMask(trace_id); /* an exact int: cannot fail */
    return fits;
}

int
extras_field(PyObject *record, int index, PyObject **field)
{
    PyObject *extras = PyTuple_GET_ITEM(record, EXTRAS);
    if (extras == Py_None) {
        *field = Py_None;
        return 0;
    }
    if (!PyTuple_Check(extras) || PyTuple_GET_SIZE(extras) != EXTRAS_FIELDS) {
        return UNSUPPORTED;
    }
    *field = PyTuple_GET_ITEM(extras, index);
    return 0;
}

int
extras_lookup(PyObject *values, PyObject *name, PyObject **value)
{
    *value = NULL;
    if (values == Py_None) {
        return 0;
    }
    if (!PyDict_CheckExact(values)) {
        return UNSUPPORTED;
    }
    /* A strong reference: on a free-threaded build another thread holding the dict
     * could replace the value meanwhile (the record's own copy, which none does).  A
     * key whose comparison raises is left to the reference, to raise or not. */
    if (PyDict_GetItemRef(values, name, value) < 0) {
        PyErr_Clear();
        return UNSUPPORTED;
    }
    return 0;
}

int
extras_environ_value(PyObject *record, PyObject *name, PyObject **value)
{
    *value = NULL;
    PyObject *environ;
    if (extras_field(record, EXTRAS_ENVIRON, &environ) != 0) {
        return UNSUPPORTED;
    }
    return extras_lookup(environ, name, value);
}
