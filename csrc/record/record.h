/* A Record (record/_record.py) as the formats read it: its fields by position, and the rule
 * for the body bytes that reach the client. */
#ifndef BOUNDLOG_RECORD_H
#define BOUNDLOG_RECORD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { TIME, DURATION, CLIENT, METHOD, PATH, QUERY, PROTOCOL, STATUS, BYTES_SENT,
       REQUEST_HEADERS, RESPONSE_HEADERS, NOTES, EXTRAS, FIELDS };

/* NOTES is None or a dict (boundlog.add_fields).  The Apache lines never show it; the C
 * JSON format and templates (%{name}n) write notes of the usual kinds (scalar.h) and
 * leave a batch with any other (a key that clashes, a value of another type) to the
 * Python core (UNSUPPORTED).  EXTRAS is None or an Extras tuple (extras.h). */

/* What a format's writer returns besides 0 and -1 (an exception is set) for a record
 * it does not read: the batch is left to the pure-Python core.  The value is
 * HEADERS_UNSUPPORTED's (headers.h), so that a lookup's answer passes through. */
#define UNSUPPORTED 1

/* What a header field (or a field the application added) costs in the queue's byte
 * budget beyond its bytes: the reference's FIELD_OVERHEAD (record/_budget.py), which
 * the module exports as _speedups.FIELD_OVERHEAD so that a test holds the two equal. */
#define FIELD_OVERHEAD 160

/* An integer field as a 64-bit integer: 0, or UNSUPPORTED for a value of another type
 * than int (exactly: not a bool) or one past 64 bits. */
static inline int
record_integer(PyObject *field, long long *number)
{
    if (!PyLong_CheckExact(field)) {
        return UNSUPPORTED;
    }
    int overflow;
    *number = PyLong_AsLongLongAndOverflow(field, &overflow);
    return overflow ? UNSUPPORTED : 0;
}

/* A float or int field (a time, a duration) as a double, as Python's arithmetic with a
 * float converts it (an int as PyLong_AsDouble does): 0, or UNSUPPORTED for a value of
 * another type or an int too big for a float (OverflowError: Python's). */
static inline int
record_double(PyObject *field, double *number)
{
    if (PyFloat_CheckExact(field)) {
        *number = PyFloat_AS_DOUBLE(field);
        return 0;
    }
    if (!PyLong_CheckExact(field)) {
        return UNSUPPORTED;
    }
    *number = PyLong_AsDouble(field);
    if (*number == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return UNSUPPORTED;
    }
    return 0;
}

/* The status and byte count of a record as 64-bit integers (record_integer). */
static inline int
record_status_and_sent(PyObject *record, long long *status, long long *sent)
{
    if (record_integer(PyTuple_GET_ITEM(record, STATUS), status) != 0
        || record_integer(PyTuple_GET_ITEM(record, BYTES_SENT), sent) != 0) {
        return UNSUPPORTED;
    }
    return 0;
}

/* Whether `method` (a str, or None) is exactly "HEAD". */
static inline int
record_is_head(PyObject *method)
{
    return method != Py_None && PyUnicode_IS_ASCII(method) && PyUnicode_GET_LENGTH(method) == 4
           && memcmp(PyUnicode_DATA(method), "HEAD", 4) == 0;
}

/* The body bytes servers really send (_columns._bytes_on_the_wire): none for a HEAD,
 * 204, 304 or 1xx response but 101 (a websocket session's frames), whatever the
 * application handed over. */
static inline long long
bytes_on_the_wire(int head, long long status, long long sent)
{
    if (head || status == 204 || status == 304 || (status >= 100 && status < 200 && status != 101)) {
        return 0;
    }
    return sent;
}

static inline long long
record_bytes_on_the_wire(PyObject *method, long long status, long long sent)
{
    return bytes_on_the_wire(record_is_head(method), status, sent);
}

#endif
