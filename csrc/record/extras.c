/* Reading a record's extras (see extras.h). */
#include "record/extras.h"

#include "common/compat.h"
#include "record/record.h"

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
