/* The record budget's measures, and the usual notes copied within it (see budget.h). */
#include "record/budget.h"

#include "common/compat.h"
#include "record/record.h"

Py_ssize_t
budget_text_length(PyObject *value)
{
    if (PyBytes_CheckExact(value)) {
        return PyBytes_GET_SIZE(value);
    }
    if (PyUnicode_CheckExact(value)) {
        return PyUnicode_GET_LENGTH(value);
    }
    return -1;
}

int
budget_headers_size(PyObject *headers, Py_ssize_t *size)
{
    int usual = 1;
    if (PyDict_CheckExact(headers)) {
        Py_BEGIN_CRITICAL_SECTION(headers);
        Py_ssize_t position = 0;
        PyObject *key, *value;
        while (PyDict_Next(headers, &position, &key, &value)) {
            if (PyUnicode_CheckExact(value)) {
                *size += FIELD_OVERHEAD + PyUnicode_GET_LENGTH(value);
            }
        }
        Py_END_CRITICAL_SECTION();
        return 1;
    }
    if (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers)) {
        return 0;
    }
    PyObject *pair;
    for (Py_ssize_t i = 0; usual && (pair = sequence_item_ref(headers, i)) != NULL; i++) {
        Py_ssize_t name = -1, value = -1;
        if (PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2) {
            name = budget_text_length(PyTuple_GET_ITEM(pair, 0));
            value = budget_text_length(PyTuple_GET_ITEM(pair, 1));
        }
        usual = name >= 0 && value >= 0;
        *size += FIELD_OVERHEAD + name + value;
        Py_DECREF(pair);
    }
    return usual;
}

int
budget_used(PyObject *path, PyObject *query, PyObject *headers, Py_ssize_t limit,
                Py_ssize_t *used)
{
    Py_ssize_t path_size = budget_text_length(path);
    Py_ssize_t query_size = budget_text_length(query);
    Py_ssize_t size = 0;
    if (path_size < 0 || query_size < 0 || !budget_headers_size(headers, &size)) {
        return 0;
    }
    size += path_size + query_size;
    *used = size < limit ? size : limit;
    return 1;
}

/* The bits of an int of 64 bits, as int.bit_length() counts them. */
static int
bit_length(long long number)
{
    unsigned long long magnitude = number < 0 ? 0ULL - (unsigned long long)number
                                              : (unsigned long long)number;
    int bits = 0;
    while (magnitude != 0) {
        bits++;
        magnitude >>= 1;
    }
    return bits;
}

int
budget_notes(PyObject *notes, Py_ssize_t limit, Py_ssize_t used, PyObject **bounded)
{
    if (!PyDict_CheckExact(notes)) {
        return 0;
    }
    /* A snapshot first: another thread may add fields meanwhile, and the copy is what
     * is measured and kept. */
    PyObject *copy = PyDict_Copy(notes);
    if (copy == NULL) {
        return -1;
    }
    /* Measured as RecordBudget.notes measures: each name's length and FIELD_OVERHEAD,
     * a str's length, an int's bytes, nothing for None, a bool or a float. */
    Py_ssize_t size = 0;
    Py_ssize_t position = 0;
    PyObject *key, *value;
    int usual = 1;
    while (usual && PyDict_Next(copy, &position, &key, &value)) {
        usual = PyUnicode_CheckExact(key);
        if (!usual) {
            break;
        }
        size += FIELD_OVERHEAD + PyUnicode_GET_LENGTH(key);
        if (PyUnicode_CheckExact(value)) {
            size += PyUnicode_GET_LENGTH(value);
        }
        else if (PyLong_CheckExact(value)) {
            int overflow;
            long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
            usual = !overflow; /* past 64 bits: the reference measures it */
            size += bit_length(number) >> 3;
        }
        else {
            usual = value == Py_None || PyBool_Check(value) || PyFloat_CheckExact(value);
        }
    }
    if (!usual || size > limit - used) {
        Py_DECREF(copy);
        return 0;
    }
    *bounded = copy;
    return 1;
}

Py_ssize_t
budget_packed_used(Packed *packed, Py_ssize_t limit)
{
    return packed->estimate < limit ? packed->estimate : limit;
}
