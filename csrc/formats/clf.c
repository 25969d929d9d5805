/* The common and combined lines, byte for byte those of _apache.ApacheFormat:
 *
 *   client - - [time] "method path?query protocol" status bytes "referer" "agent"
 *
 * Every client-controlled field is escaped (escape.c); the stamp comes from the
 * Python clock, once per distinct second per batch. */
#include "formats/clf.h"

#include "common/buffer.h"
#include "common/text.h"
#include "formats/escape.h"
#include "formats/headers.h"
#include "formats/stamps.h"
#include "record/record.h"

static int
write_escaped_bytes(Buffer *buffer, PyObject *bytes)
{
    return escape_write(buffer, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes), ESCAPE_QUOTED);
}

/* Appends one record's line: 0, -1 with an exception set, or UNSUPPORTED. */
static int
write_line(Buffer *buffer, PyObject *record, Stamps *stamps, PyObject *clock, PyObject *names,
           PyObject *environ_keys)
{
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != FIELDS) {
        return UNSUPPORTED;
    }
    /* The record is held by the caller and a tuple's items cannot change. */
    PyObject *client = PyTuple_GET_ITEM(record, CLIENT);
    PyObject *method = PyTuple_GET_ITEM(record, METHOD);
    PyObject *path = PyTuple_GET_ITEM(record, PATH);
    PyObject *query = PyTuple_GET_ITEM(record, QUERY);
    PyObject *protocol = PyTuple_GET_ITEM(record, PROTOCOL);
    PyObject *headers = PyTuple_GET_ITEM(record, REQUEST_HEADERS);
    /* Exact types only: a subclass could change how the reference reads a value. */
    long long status, sent;
    if ((client != Py_None && !PyUnicode_CheckExact(client)) || !PyUnicode_CheckExact(method)
        || !PyBytes_CheckExact(path) || !PyBytes_CheckExact(query)
        || !PyUnicode_CheckExact(protocol)
        || record_status_and_sent(record, &status, &sent) != 0) {
        return UNSUPPORTED;
    }
    Py_ssize_t start = buffer->length;
    int rc;
    /* A missing or empty client address is "-"; a space in one is escaped too. */
    if (client == Py_None || PyUnicode_GET_LENGTH(client) == 0) {
        rc = BUFFER_LITERAL(buffer, "-");
    }
    else {
        rc = escape_text_write(buffer, client, ESCAPE_UNQUOTED);
    }
    if (rc < 0
        || (rc = stamps_write_clock(buffer, stamps, clock, PyTuple_GET_ITEM(record, TIME))) != 0) {
        return rc;
    }
    if (escape_text_write(buffer, method, ESCAPE_QUOTED) < 0 || BUFFER_LITERAL(buffer, " ") < 0
        || write_escaped_bytes(buffer, path) < 0) {
        return -1;
    }
    if (PyBytes_GET_SIZE(query) > 0
        && (BUFFER_LITERAL(buffer, "?") < 0 || write_escaped_bytes(buffer, query) < 0)) {
        return -1;
    }
    if (BUFFER_LITERAL(buffer, " ") < 0 || escape_text_write(buffer, protocol, ESCAPE_QUOTED) < 0
        || BUFFER_LITERAL(buffer, "\" ") < 0 || buffer_write_decimal(buffer, status) < 0
        || BUFFER_LITERAL(buffer, " ") < 0) {
        return -1;
    }
    /* No byte is "-". */
    sent = record_bytes_on_the_wire(method, status, sent);
    rc = sent == 0 ? BUFFER_LITERAL(buffer, "-") : buffer_write_decimal(buffer, sent);
    if (rc < 0) {
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (BUFFER_LITERAL(buffer, " \"") < 0) {
            return -1;
        }
        rc = headers_write(buffer, headers, PyTuple_GET_ITEM(names, i),
                           PyTuple_GET_ITEM(environ_keys, i));
        if (rc != 0) {
            buffer->length = start;
            return rc;
        }
        if (BUFFER_LITERAL(buffer, "\"") < 0) {
            return -1;
        }
    }
    return BUFFER_LITERAL(buffer, "\n");
}

PyObject *
clf_format_apache(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "format_apache() takes 4 arguments");
        return NULL;
    }
    PyObject *clock = args[1], *names = args[2], *environ_keys = args[3];
    if (!PyTuple_CheckExact(names) || !PyTuple_CheckExact(environ_keys)
        || PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(environ_keys)) {
        PyErr_SetString(PyExc_TypeError, "names and environ_keys must be tuples of one length");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(names, i))
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(environ_keys, i))) {
            PyErr_SetString(PyExc_TypeError, "names must be bytes and environ_keys str");
            return NULL;
        }
    }
    /* A tuple of the records, each held: the caller's list may change meanwhile (a
     * list is copied under its lock on a free-threaded build). */
    PyObject *records = PySequence_Tuple(args[0]);
    if (records == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(records);
    Buffer buffer;
    /* A combined line is about 150 to 250 bytes. */
    if (buffer_init(&buffer, count * 192) < 0) {
        Py_DECREF(records);
        return NULL;
    }
    Stamps stamps = STAMPS_INIT;
    int rc = 0;
    for (Py_ssize_t i = 0; i < count && rc == 0; i++) {
        rc = write_line(&buffer, PyTuple_GET_ITEM(records, i), &stamps, clock, names,
                        environ_keys);
    }
    stamps_clear(&stamps);
    Py_DECREF(records);
    return buffer_result(&buffer, rc);
}
