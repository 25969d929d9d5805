/* Finding a request header field in a record (see headers.h). */
#include "formats/headers.h"

#include "common/compat.h"
#include "common/text.h"
#include "formats/escape.h"

/* Whether `candidate` (a pair's name, bytes or str) is `name` in any ASCII case, as
 * _headers compares: the name's bytes lower-cased by bytes.lower(). */
static int
name_matches(PyObject *candidate, const char *name, Py_ssize_t size)
{
    const char *data;
    Py_ssize_t length;
    if (PyBytes_CheckExact(candidate)) {
        data = PyBytes_AS_STRING(candidate);
        length = PyBytes_GET_SIZE(candidate);
    }
    else {
        /* A str name: only an ASCII one can equal an ASCII name once encoded. */
        if (!PyUnicode_IS_ASCII(candidate)) {
            return 0;
        }
        data = (const char *)PyUnicode_DATA(candidate);
        length = PyUnicode_GET_LENGTH(candidate);
    }
    return text_is_name(data, length, name, size);
}

/* Hands a found value, bytes or str, to `write`. */
static int
write_value(Buffer *buffer, PyObject *value, HeaderValueWriter write)
{
    TextBytes text;
    if (PyBytes_CheckExact(value)) {
        text_of_bytes(value, &text);
    }
    else if (text_latin1_or_utf8(value, &text) < 0) {
        return -1;
    }
    int rc = write(buffer, text.data, text.size);
    text_release(&text);
    return rc;
}

static int
is_text(PyObject *value)
{
    return PyBytes_CheckExact(value) || PyUnicode_CheckExact(value);
}

static int
write_from_pairs(Buffer *buffer, PyObject *pairs, PyObject *name, HeaderValueWriter write)
{
    const char *wanted = PyBytes_AS_STRING(name);
    Py_ssize_t wanted_size = PyBytes_GET_SIZE(name);
    Py_ssize_t start = buffer->length;
    int found = 0;
    PyObject *pair;
    for (Py_ssize_t i = 0; (pair = sequence_item_ref(pairs, i)) != NULL; i++) {
        /* The pair is held, and a tuple's items cannot change: they may be borrowed. */
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2
            || !is_text(PyTuple_GET_ITEM(pair, 0))) {
            Py_DECREF(pair);
            goto unsupported;
        }
        if (name_matches(PyTuple_GET_ITEM(pair, 0), wanted, wanted_size)) {
            PyObject *value = PyTuple_GET_ITEM(pair, 1);
            if (!is_text(value)) {
                Py_DECREF(pair);
                goto unsupported;
            }
            /* A field sent more than once: its values joined with ", " (RFC 9110). */
            if ((found && BUFFER_LITERAL(buffer, ", ") < 0)
                || write_value(buffer, value, write) < 0) {
                Py_DECREF(pair);
                return -1;
            }
            found = 1;
        }
        Py_DECREF(pair);
    }
    return found ? 0 : HEADERS_ABSENT;
unsupported:
    buffer->length = start;
    return HEADERS_UNSUPPORTED;
}

static int
write_from_environ(Buffer *buffer, PyObject *environ, PyObject *environ_key,
                   HeaderValueWriter write)
{
    PyObject *value;
    if (PyDict_GetItemRef(environ, environ_key, &value) < 0) {
        return -1;
    }
    int rc;
    if (value == NULL || value == Py_None) {
        rc = HEADERS_ABSENT;
    }
    else if (is_text(value)) {
        rc = write_value(buffer, value, write);
    }
    else {
        rc = HEADERS_UNSUPPORTED;
    }
    Py_XDECREF(value);
    return rc;
}

int
headers_find(Buffer *buffer, PyObject *headers, PyObject *name, PyObject *environ_key,
             HeaderValueWriter write)
{
    if (PyList_CheckExact(headers) || PyTuple_CheckExact(headers)) {
        return write_from_pairs(buffer, headers, name, write);
    }
    if (PyDict_CheckExact(headers)) {
        return write_from_environ(buffer, headers, environ_key, write);
    }
    return HEADERS_UNSUPPORTED;
}

static int
write_escaped(Buffer *buffer, const char *bytes, Py_ssize_t size)
{
    return escape_write(buffer, bytes, size, ESCAPE_QUOTED);
}

int
headers_write(Buffer *buffer, PyObject *headers, PyObject *name, PyObject *environ_key)
{
    int rc = headers_find(buffer, headers, name, environ_key, write_escaped);
    return rc == HEADERS_ABSENT ? BUFFER_LITERAL(buffer, "-") : rc;
}

int
headers_find_packed(Buffer *buffer, Packed *packed, PyObject *name, PyObject *environ_key,
                    HeaderValueWriter write)
{
    /* As headers_find: pairs (of bytes or of str) are matched by name in any case, and
     * their values joined; an environ's fields by their exact key (a dict has each
     * once). */
    int environ = (packed->flags & PACKED_HEADER_ENVIRON) != 0;
    const char *wanted = PyBytes_AS_STRING(name);
    Py_ssize_t wanted_size = PyBytes_GET_SIZE(name);
    if (environ) {
        if (!PyUnicode_IS_ASCII(environ_key)) {
            return HEADERS_ABSENT; /* packed keys are ASCII */
        }
        wanted = (const char *)PyUnicode_DATA(environ_key);
        wanted_size = PyUnicode_GET_LENGTH(environ_key);
    }
    PackedFields fields;
    packed_fields(packed, &fields);
    const char *field, *value;
    Py_ssize_t field_size, value_size;
    int found = 0;
    while (packed_next_field(&fields, &field, &field_size, &value, &value_size)) {
        int matches = environ ? field_size == wanted_size
                                    && memcmp(field, wanted, (size_t)wanted_size) == 0
                              : text_is_name(field, field_size, wanted, wanted_size);
        if (matches) {
            /* As write_from_pairs: a field sent more than once, its values joined. */
            if ((found && BUFFER_LITERAL(buffer, ", ") < 0) || write(buffer, value, value_size) < 0) {
                return -1;
            }
            found = 1;
        }
    }
    return found ? 0 : HEADERS_ABSENT;
}

int
headers_write_packed(Buffer *buffer, Packed *packed, PyObject *name, PyObject *environ_key)
{
    int rc = headers_find_packed(buffer, packed, name, environ_key, write_escaped);
    return rc == HEADERS_ABSENT ? BUFFER_LITERAL(buffer, "-") : rc;
}
