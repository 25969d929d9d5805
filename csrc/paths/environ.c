/* The record of a WSGI request (the WSGI middleware's, the gunicorn logger class's):
 * _environ.environ_record in C, which stays the reference.
 *
 * This handles the usual environ: an exact dict whose variables are exact str (or
 * absent), a target that encodes to latin-1.  For anything else it returns None
 * before calling anything, and the caller runs the Python function, which then does
 * (or raises) exactly what the reference does.  With `limit` >= 0 the request headers
 * are gunicorn's pairs or the fields the WSGI middleware picked from the environ: their
 * size is checked as RecordBudget.bounded or bounded_environ does, and `bound` (Python)
 * is called only when over the budget or of an unusual shape; with `limit` < 0 (a whole
 * environ as the headers), `bound` is always called. */
#include "paths/environ.h"

#include <string.h>

#include "common/compat.h"
#include "module_state.h"
#include "record/record.h"

static const char *const variable_names[ENVIRON_VARIABLES] = {
    "RAW_URI", "REQUEST_URI", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "REMOTE_ADDR",
    "REQUEST_METHOD", "SERVER_PROTOCOL",
};

int
environ_names(PyObject **names)
{
    for (int i = 0; i < ENVIRON_VARIABLES; i++) {
        names[i] = PyUnicode_InternFromString(variable_names[i]);
        if (names[i] == NULL) {
            return -1;
        }
    }
    return 0;
}

#define UNUSUAL 1

/* environ[name] as a strong reference in *value (NULL if absent): 0, UNUSUAL for a
 * value that is not an exact str, or -1 on error. */
static int
variable(PyObject *environ, PyObject *name, PyObject **value)
{
    int found = PyDict_GetItemRef(environ, name, value);
    if (found < 0) {
        return -1;
    }
    if (found && !PyUnicode_CheckExact(*value)) {
        Py_CLEAR(*value);
        return UNUSUAL;
    }
    return 0;
}

/* The latin-1 bytes of `text` (a str, or NULL: ""), or NULL: with an exception set on
 * error, none for a character past latin-1 (UNUSUAL: the reference raises it). */
static PyObject *
latin1(PyObject *text)
{
    if (text == NULL) {
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    PyObject *bytes = PyUnicode_AsLatin1String(text);
    if (bytes == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
    }
    return bytes;
}

static int
nonempty(PyObject *text)
{
    return text != NULL && PyUnicode_GET_LENGTH(text) > 0;
}

/* Path and query as the reference finds them: the target's (RAW_URI, REQUEST_URI)
 * split at its first "?", else SCRIPT_NAME + PATH_INFO and QUERY_STRING.  0, UNUSUAL
 * (nothing set), or -1. */
static int
target(PyObject **values, PyObject **path, PyObject **query)
{
    PyObject *uri = nonempty(values[RAW_URI]) ? values[RAW_URI] : values[REQUEST_URI];
    if (nonempty(uri)) {
        PyObject *bytes = latin1(uri);
        if (bytes == NULL) {
            return PyErr_Occurred() ? -1 : UNUSUAL;
        }
        const char *data = PyBytes_AS_STRING(bytes);
        Py_ssize_t size = PyBytes_GET_SIZE(bytes);
        const char *mark = memchr(data, '?', (size_t)size);
        if (mark == NULL) {
            *path = bytes;
            *query = PyBytes_FromStringAndSize(NULL, 0);
        }
        else {
            *path = PyBytes_FromStringAndSize(data, mark - data);
            *query = *path == NULL ? NULL : PyBytes_FromStringAndSize(mark + 1, size - (mark - data) - 1);
            Py_DECREF(bytes);
        }
    }
    else {
        PyObject *script = latin1(values[SCRIPT_NAME]);
        PyObject *info = script == NULL ? NULL : latin1(values[PATH_INFO]);
        *query = info == NULL ? NULL : latin1(values[QUERY_STRING]);
        if (*query != NULL) {
            PyBytes_Concat(&script, info); /* leaves NULL on error */
            *path = script;
            script = NULL;
        }
        Py_XDECREF(script);
        Py_XDECREF(info);
        if (*query == NULL) {
            return PyErr_Occurred() ? -1 : UNUSUAL;
        }
    }
    if (*path == NULL || *query == NULL) {
        Py_CLEAR(*path);
        Py_CLEAR(*query);
        return -1;
    }
    return 0;
}

/* What RecordBudget.bounded_environ counts of the header fields the WSGI middleware
 * picked out of the environ (a dict of exact str or None), or -1 for another value. */
static Py_ssize_t
picked_bytes(PyObject *picked, Py_ssize_t size)
{
    PyObject *key, *value;
    Py_ssize_t position = 0;
    /* Only lengths are read (no code runs), inside the section, before the dict can
     * change. */
    Py_BEGIN_CRITICAL_SECTION(picked);
    while (size >= 0 && PyDict_Next(picked, &position, &key, &value)) {
        if (value == Py_None) {
            continue;
        }
        Py_ssize_t length = PyUnicode_CheckExact(value) ? PyUnicode_GET_LENGTH(value) : -1;
        size = length < 0 || size > PY_SSIZE_T_MAX - FIELD_OVERHEAD - length
               ? -1 : size + FIELD_OVERHEAD + length;
    }
    Py_END_CRITICAL_SECTION();
    return size;
}

/* What the budget counts of path, query and request headers: header pairs (a list or
 * tuple of 2-tuples of exact str or bytes) as RecordBudget.bounded does, the fields
 * picked from an environ (an exact dict) as bounded_environ does; -1 for headers of
 * another shape. */
static Py_ssize_t
client_bytes(PyObject *path, PyObject *query, PyObject *headers)
{
    Py_ssize_t size = PyBytes_GET_SIZE(path) + PyBytes_GET_SIZE(query);
    if (PyDict_CheckExact(headers)) {
        return picked_bytes(headers, size);
    }
    if (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers)) {
        return -1;
    }
    PyObject *pair;
    for (Py_ssize_t i = 0; (pair = sequence_item_ref(headers, i)) != NULL; i++) {
        Py_ssize_t pair_size = -1;
        if (PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2) {
            pair_size = FIELD_OVERHEAD;
            for (int k = 0; k < 2 && pair_size >= 0; k++) {
                PyObject *item = PyTuple_GET_ITEM(pair, k);
                pair_size = PyUnicode_CheckExact(item) ? pair_size + PyUnicode_GET_LENGTH(item)
                            : PyBytes_CheckExact(item) ? pair_size + PyBytes_GET_SIZE(item)
                                                       : -1;
            }
        }
        Py_DECREF(pair);
        if (pair_size < 0 || size > PY_SSIZE_T_MAX - pair_size) {
            return -1;
        }
        size += pair_size;
    }
    return size;
}

/* `a, b, c = bound(path, query, headers)`: three strong references, or -1. */
static int
call_bound(PyObject *bound, PyObject **fields)
{
    PyObject *args[3] = {fields[0], fields[1], fields[2]};
    PyObject *result = PyObject_Vectorcall(bound, args, 3, NULL);
    PyObject *items = result == NULL ? NULL : PySequence_Tuple(result);
    Py_XDECREF(result);
    if (items == NULL) {
        return -1;
    }
    if (PyTuple_GET_SIZE(items) != 3) {
        if (PyTuple_GET_SIZE(items) > 3) {
            PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 3)");
        }
        else {
            PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected 3, got %zd)",
                         PyTuple_GET_SIZE(items));
        }
        Py_DECREF(items);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        Py_SETREF(fields[i], Py_NewRef(PyTuple_GET_ITEM(items, i)));
    }
    Py_DECREF(items);
    return 0;
}

/* tuple.__new__(record_type, fields), stealing the FIELDS fields (NULL on error). */
static PyObject *
make_record(PyObject *record_type, PyObject **fields)
{
    PyObject *record = ((PyTypeObject *)record_type)->tp_alloc((PyTypeObject *)record_type, FIELDS);
    for (int i = 0; i < FIELDS; i++) {
        if (record != NULL) {
            PyTuple_SET_ITEM(record, i, fields[i]);
        }
        else {
            Py_DECREF(fields[i]);
        }
    }
    if (record != NULL) {
        /* As asgi_record.c's: nothing a record holds refers back to it. */
        PyObject_GC_UnTrack(record);
    }
    return record;
}

PyObject *
environ_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "environ_record() takes exactly 12 arguments");
        return NULL;
    }
    PyObject *record_type = args[0], *environ = args[1], *bound = args[8];
    Py_ssize_t limit = PyLong_AsSsize_t(args[9]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyType_Check(record_type) || !PyType_IsSubtype((PyTypeObject *)record_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "environ_record(): record_type must be a tuple type");
        return NULL;
    }
    if (!PyDict_CheckExact(environ)) {
        Py_RETURN_NONE;
    }
    ModuleState *state = PyModule_GetState(module);
    PyObject *values[ENVIRON_VARIABLES] = {NULL};
    PyObject *fields[FIELDS] = {NULL};
    PyObject *result = NULL;
    int rc = 0;
    for (int i = 0; i < ENVIRON_VARIABLES && rc == 0; i++) {
        rc = variable(environ, state->environ_names[i], &values[i]);
    }
    if (rc == 0) {
        rc = target(values, &fields[4], &fields[5]);
    }
    if (rc != 0) {
        result = rc < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t size = limit < 0 ? -1 : client_bytes(fields[4], fields[5], args[6]);
    PyObject *client[3] = {fields[4], fields[5], Py_NewRef(args[6])};
    fields[4] = fields[5] = NULL;
    rc = size < 0 || size > limit ? call_bound(bound, client) : 0;
    fields[4] = client[0];
    fields[5] = client[1];
    fields[9] = client[2];
    if (rc < 0) {
        goto done;
    }
    fields[0] = Py_NewRef(args[2]);
    fields[1] = Py_NewRef(args[3]);
    fields[2] = Py_NewRef(nonempty(values[REMOTE_ADDR]) ? values[REMOTE_ADDR] : Py_None);
    if (nonempty(values[REQUEST_METHOD])) {
        fields[3] = Py_NewRef(values[REQUEST_METHOD]);
    }
    else if ((fields[3] = PyUnicode_FromString("-")) == NULL) {
        goto done;
    }
    if (nonempty(values[SERVER_PROTOCOL])) {
        fields[6] = Py_NewRef(values[SERVER_PROTOCOL]);
    }
    else if ((fields[6] = PyUnicode_FromString("HTTP/1.0")) == NULL) {
        goto done;
    }
    fields[7] = Py_NewRef(args[4]);
    fields[8] = Py_NewRef(args[5]);
    fields[10] = Py_NewRef(args[7]);
    fields[NOTES] = Py_NewRef(args[10]); /* the caller's copy, or None */
    fields[EXTRAS] = Py_NewRef(args[11]);
    result = make_record(record_type, fields);
    for (int i = 0; i < FIELDS; i++) {
        fields[i] = NULL; /* stolen */
    }
done:
    for (int i = 0; i < FIELDS; i++) {
        Py_XDECREF(fields[i]);
    }
    for (int i = 0; i < ENVIRON_VARIABLES; i++) {
        Py_XDECREF(values[i]);
    }
    return result;
}
