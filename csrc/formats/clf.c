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
#include "record/packed.h"
#include "record/record.h"

/* One line's fields, as bytes, from a record or a Packed one. */
typedef struct {
    TextBytes client, method, protocol; /* client size 0: "-" */
    const char *path, *query;
    Py_ssize_t path_size, query_size;
    PyObject *when; /* the record's time, or NULL for `seconds` (a Packed record's) */
    double seconds;
    long long status, sent; /* sent as on the wire */
    PyObject *headers;      /* the record's request headers, or NULL for `packed`'s */
    Packed *packed;
} Line;

static void
line_release(Line *line)
{
    text_release(&line->client);
    text_release(&line->method);
    text_release(&line->protocol);
}

/* A Packed record's line (record/packed.h): its texts are the UTF-8 the record's are
 * escaped as, and its shape is one a record's line reads (packed_from_record packs no
 * other).  Nothing to release. */
static void
packed_line(Packed *packed, Line *line)
{
    line->client.data = packed_text(packed, PACKED_CLIENT, &line->client.size);
    line->method.data = packed_text(packed, PACKED_METHOD, &line->method.size);
    line->protocol.data = packed_text(packed, PACKED_PROTOCOL, &line->protocol.size);
    line->client.owner = line->method.owner = line->protocol.owner = NULL;
    line->path = packed_text(packed, PACKED_PATH, &line->path_size);
    line->query = packed_text(packed, PACKED_QUERY, &line->query_size);
    line->when = NULL;
    line->seconds = packed->time;
    int head = line->method.size == 4 && memcmp(line->method.data, "HEAD", 4) == 0;
    line->status = packed->status;
    line->sent = bytes_on_the_wire(head, packed->status, packed->sent);
    line->headers = NULL;
    line->packed = packed;
}

/* A record's line: 0 (release it after), -1 with an exception set, or UNSUPPORTED. */
static int
record_line(PyObject *record, Line *line)
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
    /* Exact types only: a subclass could change how the reference reads a value. */
    long long status, sent;
    if ((client != Py_None && !PyUnicode_CheckExact(client)) || !PyUnicode_CheckExact(method)
        || !PyBytes_CheckExact(path) || !PyBytes_CheckExact(query)
        || !PyUnicode_CheckExact(protocol)
        || record_status_and_sent(record, &status, &sent) != 0) {
        return UNSUPPORTED;
    }
    line->client = (TextBytes){"", 0, NULL};
    line->method.owner = NULL;
    line->protocol.owner = NULL;
    /* A missing or empty client address is "-". */
    if ((client != Py_None && text_utf8(client, &line->client) < 0)
        || text_utf8(method, &line->method) < 0 || text_utf8(protocol, &line->protocol) < 0) {
        line_release(line);
        return -1;
    }
    line->path = PyBytes_AS_STRING(path);
    line->path_size = PyBytes_GET_SIZE(path);
    line->query = PyBytes_AS_STRING(query);
    line->query_size = PyBytes_GET_SIZE(query);
    line->when = PyTuple_GET_ITEM(record, TIME);
    line->status = status;
    line->sent = record_bytes_on_the_wire(method, status, sent);
    line->headers = PyTuple_GET_ITEM(record, REQUEST_HEADERS);
    line->packed = NULL;
    return 0;
}

/* Appends one line: 0, -1 with an exception set, or UNSUPPORTED. */
static int
write_line(Buffer *buffer, Line *line, Stamps *stamps, PyObject *clock, PyObject *names,
           PyObject *environ_keys)
{
    Py_ssize_t start = buffer->length;
    /* A space in the client address is escaped too. */
    int rc = line->client.size == 0
                 ? BUFFER_LITERAL(buffer, "-")
                 : escape_write(buffer, line->client.data, line->client.size, ESCAPE_UNQUOTED);
    if (rc < 0) {
        return rc;
    }
    rc = line->when != NULL ? stamps_write_clock(buffer, stamps, clock, line->when)
                            : stamps_write_seconds(buffer, stamps, clock, line->seconds);
    if (rc != 0) {
        return rc;
    }
    if (escape_write(buffer, line->method.data, line->method.size, ESCAPE_QUOTED) < 0
        || BUFFER_LITERAL(buffer, " ") < 0
        || escape_write(buffer, line->path, line->path_size, ESCAPE_QUOTED) < 0) {
        return -1;
    }
    if (line->query_size > 0
        && (BUFFER_LITERAL(buffer, "?") < 0
            || escape_write(buffer, line->query, line->query_size, ESCAPE_QUOTED) < 0)) {
        return -1;
    }
    if (BUFFER_LITERAL(buffer, " ") < 0
        || escape_write(buffer, line->protocol.data, line->protocol.size, ESCAPE_QUOTED) < 0
        || BUFFER_LITERAL(buffer, "\" ") < 0 || buffer_write_decimal(buffer, line->status) < 0
        || BUFFER_LITERAL(buffer, " ") < 0) {
        return -1;
    }
    /* No byte is "-". */
    rc = line->sent == 0 ? BUFFER_LITERAL(buffer, "-") : buffer_write_decimal(buffer, line->sent);
    if (rc < 0) {
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (BUFFER_LITERAL(buffer, " \"") < 0) {
            return -1;
        }
        rc = line->packed != NULL
                 ? headers_write_packed(buffer, line->packed, PyTuple_GET_ITEM(names, i),
                                        PyTuple_GET_ITEM(environ_keys, i))
                 : headers_write(buffer, line->headers, PyTuple_GET_ITEM(names, i),
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

/* Appends one record's line (a Record or a Packed one). */
static int
write_record(Buffer *buffer, PyObject *record, Stamps *stamps, PyObject *clock, PyObject *names,
             PyObject *environ_keys)
{
    Line line;
    if (packed_check(record)) {
        packed_line((Packed *)record, &line);
    }
    else {
        int rc = record_line(record, &line);
        if (rc != 0) {
            return rc;
        }
    }
    int rc = write_line(buffer, &line, stamps, clock, names, environ_keys);
    line_release(&line);
    return rc;
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
        rc = write_record(&buffer, PyTuple_GET_ITEM(records, i), &stamps, clock, names,
                          environ_keys);
    }
    stamps_clear(&stamps);
    Py_DECREF(records);
    return buffer_result(&buffer, rc);
}
