/* Log templates, byte for byte those of _templates.Template.format_batch_python.
 *
 * The template is parsed in Python, once, into ops (template.h); each record's line
 * is the ops' pieces in order.  The reference builds a batch raw first and escapes it
 * only when a client byte could have changed the line's shape; here each client
 * field is escaped as it is written (escape.c), which gives the same bytes: a batch
 * passes the reference's shape check exactly when none of its client fields holds a
 * byte that escaping changes, because every other field is plain in both passes
 * (escaped, or digits, or a clock's plain stamp) and the template's text is the same. */
#include "formats/template.h"

#include <math.h>

#include "common/buffer.h"
#include "formats/escape.h"
#include "formats/headers.h"
#include "formats/scalar.h"
#include "formats/stamps.h"
#include "formats/trace.h"
#include "record/extras.h"
#include "record/packed.h"
#include "record/record.h"

/* The ops: their codes (the order of _templates._C_OPS), and their number and object
 * (anything, unread, where none is given). */
enum {
    OP_TEXT,             /* object: the template's own bytes */
    OP_CLIENT,           /* the client address, unquoted: "-" for None or "" */
    OP_PATH,             /* the path, escaped */
    OP_QUERY,            /* the query, escaped */
    OP_QUERY_MARK,       /* "?" before a query that is not empty */
    OP_METHOD,           /* the method, escaped */
    OP_PROTOCOL,         /* the protocol, escaped */
    OP_STATUS,           /* the status */
    OP_PID,              /* the pid of the call */
    OP_TIME,             /* object: the field's clock (stamps.h), its text around it */
    OP_EPOCH,            /* number: units a second; floor(time * number) */
    OP_EPOCH_FRACTION,   /* number: units a second; the units past the whole second */
    OP_BYTES,            /* the body bytes on the wire */
    OP_BYTES_OR_DASH,    /* the same, "-" for none */
    OP_DURATION,         /* number: microseconds a unit; the duration in whole units */
    OP_SECONDS_FRACTION, /* the duration as seconds.microseconds */
    OP_HEADER,           /* number: HEADER_* flags; object: (name, environ_key) */
    OP_USER,             /* object: (name, environ_key, user): the Basic credentials' user */
    OP_EXTRA,            /* number: the index of a field of the record's extras (extras.h) */
    OP_TRACE,            /* number: 0 the trace id, 1 the span id; object: (name,
                          * environ_key) of the traceparent field */
    OP_CONNECTION_STATUS, /* object: (name, environ_key) of the Connection field: %X */
    OP_ENVIRON,          /* object: the name (str) of a server variable in the extras */
    OP_NOTE,             /* object: the name (str) of a note */
    OPS
};
enum { HEADER_RESPONSE = 1, HEADER_REDACT = 2 };

#define REDACTED "[redacted]"

/* One op, read from its tuple once a call.  The objects are borrowed from `ops`, a
 * tuple the caller holds for the call, whose items cannot change. */
typedef struct {
    int code;
    long long number;
    PyObject *object;
    PyObject *name, *environ_key, *user; /* the parts of the ops that read a header field */
    Stamps stamps;                       /* OP_TIME's, for the call */
} Op;

typedef struct {
    Op *ops;
    Py_ssize_t count;
    long long pid;
    Buffer scratch; /* a header value gathered before it is judged */
} Line;

/* Reads op `item` into `op`: 1, or 0 if it is not an op of template.h's shape. */
static int
read_op(PyObject *item, Op *op)
{
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3
        || !PyLong_CheckExact(PyTuple_GET_ITEM(item, 0))
        || !PyLong_CheckExact(PyTuple_GET_ITEM(item, 1))) {
        return 0;
    }
    int overflow;
    long long code = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(item, 0), &overflow);
    if (overflow || code < 0 || code >= OPS) {
        return 0;
    }
    long long number = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(item, 1), &overflow);
    if (overflow) {
        return 0;
    }
    PyObject *object = PyTuple_GET_ITEM(item, 2);
    op->code = (int)code;
    op->number = number;
    op->object = object;
    switch (code) {
    case OP_TEXT:
        return PyBytes_CheckExact(object);
    case OP_TIME:
        return PyCallable_Check(object);
    case OP_EPOCH:
    case OP_EPOCH_FRACTION:
    case OP_DURATION:
        return number >= 1 && number <= 1000000;
    case OP_EXTRA:
        return number >= 0 && number < EXTRAS_FIELDS;
    case OP_ENVIRON:
    case OP_NOTE:
        return PyUnicode_CheckExact(object);
    case OP_HEADER:
    case OP_USER:
    case OP_TRACE:
    case OP_CONNECTION_STATUS: {
        Py_ssize_t size = code == OP_USER ? 3 : 2;
        if (!PyTuple_CheckExact(object) || PyTuple_GET_SIZE(object) != size
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(object, 0))
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(object, 1))
            || (code == OP_USER && !PyCallable_Check(PyTuple_GET_ITEM(object, 2)))) {
            return 0;
        }
        op->name = PyTuple_GET_ITEM(object, 0);
        op->environ_key = PyTuple_GET_ITEM(object, 1);
        op->user = code == OP_USER ? PyTuple_GET_ITEM(object, 2) : NULL;
        if (code == OP_HEADER) {
            return number >= 0 && number <= (HEADER_RESPONSE | HEADER_REDACT);
        }
        return code != OP_TRACE || number == 0 || number == 1;
    }
    default:
        return 1;
    }
}

/* A duration in microseconds as Template's _Batch.microseconds gives it:
 * int(duration * 1e6 + 0.5), or *present 0 ("-") when it is not in [0, inf).  0, or
 * UNSUPPORTED where Python raises (int() of an infinity) or the number passes 64 bits. */
static int
microseconds_of(double duration, long long *microseconds, int *present)
{
    *present = duration >= 0 && duration < INFINITY; /* NaN fails */
    if (!*present) {
        return 0;
    }
    /* Two statements, so that no compiler fuses them into one multiply-add. */
    double scaled = duration * 1e6;
    double rounded = scaled + 0.5;
    if (!(rounded < 9.2e18)) {
        return UNSUPPORTED;
    }
    *microseconds = (long long)rounded;
    return 0;
}

/* Appends `number` in decimal, zero-padded to `width` digits (b"%0*d", not negative). */
static int
write_padded(Buffer *buffer, long long number, int width)
{
    char digits[24];
    int length = 0;
    do {
        digits[length++] = (char)('0' + number % 10);
        number /= 10;
    } while (number != 0);
    while (length < width) {
        digits[length++] = '0';
    }
    if (buffer_reserve(buffer, length) < 0) {
        return -1;
    }
    char *out = buffer->data + buffer->length;
    for (int i = 0; i < length; i++) {
        out[i] = digits[length - 1 - i];
    }
    buffer->length += length;
    return 0;
}

/* Apache's %{sec}t and its kin (_templates._epoch_fields): floor(time * units), or
 * for a fraction that modulo the units, zero-padded to their digits. */
static int
write_epoch(Buffer *buffer, double t, long long units, int fraction)
{
    double scaled = t * (double)units;
    /* math.floor raises for NaN and the infinities; past 64 bits is left to Python. */
    if (!(fabs(scaled) < 9.2e18)) {
        return UNSUPPORTED;
    }
    long long count = (long long)floor(scaled);
    if (!fraction) {
        return buffer_write_decimal(buffer, count);
    }
    count %= units;
    if (count < 0) {
        count += units; /* Python's modulo has the divisor's sign */
    }
    int width = 0;
    for (long long rest = units - 1; rest > 0; rest /= 10) {
        width++;
    }
    return write_padded(buffer, count, width);
}

/* Strips what bytes.strip() strips: ASCII whitespace. */
static int
is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

/* Whether `value` starts, once stripped, with the scheme "Basic" (any case) followed
 * by a space or its end: authorization.strip().partition(b" ")[0].lower() == b"basic". */
static int
is_basic(const char *value, Py_ssize_t size)
{
    Py_ssize_t start = 0;
    while (start < size && is_space(value[start])) {
        start++;
    }
    while (size > start && is_space(value[size - 1])) {
        size--;
    }
    static const char basic[] = "basic";
    if (size - start < 5) {
        return 0;
    }
    for (int i = 0; i < 5; i++) {
        char c = value[start + i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c + ('a' - 'A'));
        }
        if (c != basic[i]) {
            return 0;
        }
    }
    return size - start == 5 || value[start + 5] == ' ';
}

/* The user name of Basic credentials (%u): "-" without them; with them, what the
 * reference's _user gives (called: base64 is decoded as Python decodes it).  `rc` is
 * the Authorization field's lookup (headers.h), its value in the line's scratch. */
static int
write_user(Buffer *buffer, Line *line, const Op *op, int rc)
{
    Buffer *scratch = &line->scratch;
    if (rc == HEADERS_ABSENT || (rc == 0 && !is_basic(scratch->data, scratch->length))) {
        return BUFFER_LITERAL(buffer, "-");
    }
    if (rc != 0) {
        return rc;
    }
    PyObject *value = PyBytes_FromStringAndSize(scratch->data, scratch->length);
    if (value == NULL) {
        return -1;
    }
    PyObject *user = PyObject_CallOneArg(op->user, value);
    Py_DECREF(value);
    if (user == NULL || !PyBytes_CheckExact(user)) {
        /* The reference does the same: let it. */
        Py_XDECREF(user);
        PyErr_Clear();
        return UNSUPPORTED;
    }
    rc = buffer_write(buffer, PyBytes_AS_STRING(user), PyBytes_GET_SIZE(user));
    Py_DECREF(user);
    return rc;
}

/* A field's value looked up into the line's scratch: what headers_find returns. */
static int
find_field(Line *line, const Op *op, PyObject *headers)
{
    line->scratch.length = 0;
    return headers_find(&line->scratch, headers, op->name, op->environ_key, buffer_write);
}

/* find_field in a Packed record's request header fields. */
static int
find_packed_field(Line *line, const Op *op, Packed *packed)
{
    line->scratch.length = 0;
    return headers_find_packed(&line->scratch, packed, op->name, op->environ_key, buffer_write);
}

/* A redacted header field: "-" when absent, else the redaction (`rc`: its lookup). */
static int
write_redacted(Buffer *buffer, int rc)
{
    if (rc == HEADERS_ABSENT) {
        return BUFFER_LITERAL(buffer, "-");
    }
    return rc != 0 ? rc : BUFFER_LITERAL(buffer, REDACTED);
}

/* A request or response header field: escaped, "-" when absent, or the redaction. */
static int
write_header(Buffer *buffer, Line *line, const Op *op, PyObject *record)
{
    PyObject *headers = PyTuple_GET_ITEM(
        record, (op->number & HEADER_RESPONSE) ? RESPONSE_HEADERS : REQUEST_HEADERS);
    if (!(op->number & HEADER_REDACT)) {
        return headers_write(buffer, headers, op->name, op->environ_key);
    }
    return write_redacted(buffer, find_field(line, op, headers));
}

/* A str field (method, protocol), escaped. */
static int
write_text(Buffer *buffer, PyObject *text)
{
    if (!PyUnicode_CheckExact(text)) {
        return UNSUPPORTED;
    }
    return escape_text_write(buffer, text, ESCAPE_QUOTED);
}

/* A bytes field (path, query), escaped. */
static int
write_bytes(Buffer *buffer, PyObject *bytes)
{
    if (!PyBytes_CheckExact(bytes)) {
        return UNSUPPORTED;
    }
    return escape_write(buffer, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes), ESCAPE_QUOTED);
}

static int
write_client(Buffer *buffer, PyObject *client)
{
    if (client == Py_None || (PyUnicode_CheckExact(client) && PyUnicode_GET_LENGTH(client) == 0)) {
        return BUFFER_LITERAL(buffer, "-");
    }
    if (!PyUnicode_CheckExact(client)) {
        return UNSUPPORTED;
    }
    /* Unquoted in the Common Log Format: a space is escaped too. */
    return escape_text_write(buffer, client, ESCAPE_UNQUOTED);
}

/* The body bytes on the wire (record.h), or "-" for none if `dash`. */
static int
write_sent(Buffer *buffer, PyObject *record, int dash)
{
    PyObject *method = PyTuple_GET_ITEM(record, METHOD);
    long long status, sent;
    if ((method != Py_None && !PyUnicode_CheckExact(method))
        || record_status_and_sent(record, &status, &sent) != 0) {
        return UNSUPPORTED;
    }
    sent = record_bytes_on_the_wire(method, status, sent);
    if (dash && sent == 0) {
        return BUFFER_LITERAL(buffer, "-");
    }
    return buffer_write_decimal(buffer, sent);
}

/* A duration in whole units of `divisor` microseconds, or as seconds.microseconds. */
static int
write_duration(Buffer *buffer, double duration, long long divisor, int seconds_fraction)
{
    long long microseconds = 0;
    int present = 0;
    int rc = microseconds_of(duration, &microseconds, &present);
    if (rc != 0) {
        return rc;
    }
    if (!present) {
        return BUFFER_LITERAL(buffer, "-");
    }
    if (!seconds_fraction) {
        return buffer_write_decimal(buffer, microseconds / divisor);
    }
    if (buffer_write_decimal(buffer, microseconds / 1000000) < 0
        || BUFFER_LITERAL(buffer, ".") < 0) {
        return -1;
    }
    return write_padded(buffer, microseconds % 1000000, 6);
}

/* A field of the record's extras (%{route}x, %I and the others): note_text's text,
 * escaped, "-" when unknown. */
static int
write_extra(Buffer *buffer, PyObject *record, int index)
{
    PyObject *value;
    if (extras_field(record, index, &value) != 0) {
        return UNSUPPORTED;
    }
    return scalar_write_text(buffer, value);
}

/* The trace or span id of `ids` (op->number 0 or 1), "-" for NULL. */
static int
write_trace_ids(Buffer *buffer, const Op *op, const TraceIds *ids)
{
    if (ids == NULL) {
        return BUFFER_LITERAL(buffer, "-");
    }
    return op->number == 0 ? buffer_write(buffer, ids->trace_id, 32)
                           : buffer_write(buffer, ids->span_id, 16);
}

/* %{trace_id}x or %{span_id}x (_templates._trace_column): the span's, else the
 * traceparent field's, "-" for none.  The field is looked up even when the span gives
 * the ids, as the reference reads it for every record: headers it would fail on are
 * left to it. */
static int
write_trace(Buffer *buffer, Line *line, const Op *op, PyObject *record)
{
    PyObject *trace;
    if (extras_field(record, EXTRAS_TRACE, &trace) != 0) {
        return UNSUPPORTED;
    }
    TraceIds ids, span;
    int found;
    int rc = trace_ids_from_headers(&line->scratch, PyTuple_GET_ITEM(record, REQUEST_HEADERS),
                                    op->name, op->environ_key, &ids, &found);
    if (rc != 0) {
        return rc;
    }
    if (trace_ids_from_span(trace, &span)) {
        ids = span;
        found = 1;
    }
    return write_trace_ids(buffer, op, found ? &ids : NULL);
}

/* What str.strip() strips of text decoded as latin-1: the Unicode whitespace below
 * 256, which holds 0x1c-0x1f, 0x85 and 0xa0 besides ASCII's. */
static int
is_latin1_space(unsigned char c)
{
    return (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= ' ') || c == 0x85 || c == 0xa0;
}

/* Whether `token` is `lower` (lower-case ASCII) once lower-cased: no character of
 * latin-1 but A-Z lower-cases into ASCII, so the rest must match as they are. */
static int
token_is(const unsigned char *token, Py_ssize_t size, const char *lower)
{
    if ((size_t)size != strlen(lower)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = token[i];
        if (c >= 'A' && c <= 'Z') {
            c = (unsigned char)(c + ('a' - 'A'));
        }
        if (c != (unsigned char)lower[i]) {
            return 0;
        }
    }
    return 1;
}

/* Notes in *close and *keep_alive the tokens of a Connection value (its bytes read as
 * latin-1): split at commas, stripped, lower-cased, as _connection_status reads them. */
static void
read_connection_tokens(const char *value, Py_ssize_t size, int *close, int *keep_alive)
{
    const unsigned char *bytes = (const unsigned char *)value;
    Py_ssize_t start = 0;
    while (start <= size) {
        Py_ssize_t end = start;
        while (end < size && bytes[end] != ',') {
            end++;
        }
        Py_ssize_t first = start, last = end;
        while (first < last && is_latin1_space(bytes[first])) {
            first++;
        }
        while (last > first && is_latin1_space(bytes[last - 1])) {
            last--;
        }
        *close |= token_is(bytes + first, last - first, "close");
        *keep_alive |= token_is(bytes + first, last - first, "keep-alive");
        start = end + 1;
    }
}

/* Apache's %X (_templates._connection_status): "X" when the response did not complete,
 * "-" when nobody knows or the connection closes after it, "+" when it may stay open.
 * Both Connection fields are looked up whatever the completion: the reference reads
 * them for every record. */
static int
write_connection_status(Buffer *buffer, Line *line, const Op *op, PyObject *record)
{
    PyObject *completed;
    if (extras_field(record, EXTRAS_COMPLETED, &completed) != 0) {
        return UNSUPPORTED;
    }
    int close = 0, keep_alive = 0;
    for (int response = 0; response <= 1; response++) {
        line->scratch.length = 0;
        int rc = headers_find(&line->scratch,
                              PyTuple_GET_ITEM(record, response ? RESPONSE_HEADERS : REQUEST_HEADERS),
                              op->name, op->environ_key, buffer_write);
        if (rc == 0) {
            read_connection_tokens(line->scratch.data, line->scratch.length, &close,
                                   &keep_alive);
        }
        else if (rc != HEADERS_ABSENT) {
            return rc;
        }
    }
    if (completed == Py_False) {
        return BUFFER_LITERAL(buffer, "X");
    }
    if (completed != Py_True || close) {
        return BUFFER_LITERAL(buffer, "-");
    }
    /* HTTP/1.0 closes unless the client asks to keep the connection. */
    PyObject *protocol = PyTuple_GET_ITEM(record, PROTOCOL);
    if (protocol != Py_None && !PyUnicode_CheckExact(protocol)) {
        return UNSUPPORTED; /* compared with == by the reference */
    }
    if (protocol != Py_None && PyUnicode_CompareWithASCIIString(protocol, "HTTP/1.0") == 0
        && !keep_alive) {
        return BUFFER_LITERAL(buffer, "-");
    }
    return BUFFER_LITERAL(buffer, "+");
}

/* A server variable (%{NAME}e) or a note (%{name}n): note_text's text of its value
 * (`value`, found with rc 0, NULL if none), escaped, "-" when there is none. */
static int
write_found(Buffer *buffer, int rc, PyObject *value)
{
    if (rc != 0) {
        return rc;
    }
    if (value == NULL) {
        return BUFFER_LITERAL(buffer, "-");
    }
    rc = scalar_write_text(buffer, value);
    Py_DECREF(value);
    return rc;
}

static int
write_variable(Buffer *buffer, const Op *op, PyObject *record)
{
    PyObject *value;
    int rc = op->code == OP_ENVIRON ? extras_environ_value(record, op->object, &value)
                                    : extras_lookup(PyTuple_GET_ITEM(record, NOTES),
                                                    op->object, &value);
    return write_found(buffer, rc, value);
}

/* Appends one op's piece of a record's line: 0, -1 with an exception set, or
 * UNSUPPORTED.  The record is held by the caller and a tuple's items cannot change:
 * they may be borrowed. */
static int
write_op(Buffer *buffer, Line *line, Op *op, PyObject *record)
{
    long long status;
    double number;
    PyObject *query;
    switch (op->code) {
    case OP_TEXT:
        return buffer_write(buffer, PyBytes_AS_STRING(op->object), PyBytes_GET_SIZE(op->object));
    case OP_CLIENT:
        return write_client(buffer, PyTuple_GET_ITEM(record, CLIENT));
    case OP_PATH:
        return write_bytes(buffer, PyTuple_GET_ITEM(record, PATH));
    case OP_QUERY:
        return write_bytes(buffer, PyTuple_GET_ITEM(record, QUERY));
    case OP_QUERY_MARK:
        query = PyTuple_GET_ITEM(record, QUERY);
        if (!PyBytes_CheckExact(query)) {
            return UNSUPPORTED;
        }
        return PyBytes_GET_SIZE(query) > 0 ? BUFFER_LITERAL(buffer, "?") : 0;
    case OP_METHOD:
        return write_text(buffer, PyTuple_GET_ITEM(record, METHOD));
    case OP_PROTOCOL:
        return write_text(buffer, PyTuple_GET_ITEM(record, PROTOCOL));
    case OP_STATUS:
        if (record_integer(PyTuple_GET_ITEM(record, STATUS), &status) != 0) {
            return UNSUPPORTED;
        }
        return buffer_write_decimal(buffer, status);
    case OP_PID:
        return buffer_write_decimal(buffer, line->pid);
    case OP_TIME:
        return stamps_write_clock(buffer, &op->stamps, op->object, PyTuple_GET_ITEM(record, TIME));
    case OP_EPOCH:
    case OP_EPOCH_FRACTION:
        if (record_double(PyTuple_GET_ITEM(record, TIME), &number) != 0) {
            return UNSUPPORTED;
        }
        return write_epoch(buffer, number, op->number, op->code == OP_EPOCH_FRACTION);
    case OP_BYTES:
    case OP_BYTES_OR_DASH:
        return write_sent(buffer, record, op->code == OP_BYTES_OR_DASH);
    case OP_DURATION:
    case OP_SECONDS_FRACTION:
        if (record_double(PyTuple_GET_ITEM(record, DURATION), &number) != 0) {
            return UNSUPPORTED;
        }
        return op->code == OP_DURATION ? write_duration(buffer, number, op->number, 0)
                                       : write_duration(buffer, number, 1, 1);
    case OP_HEADER:
        return write_header(buffer, line, op, record);
    case OP_USER:
        return write_user(buffer, line, op,
                          find_field(line, op, PyTuple_GET_ITEM(record, REQUEST_HEADERS)));
    case OP_EXTRA:
        return write_extra(buffer, record, (int)op->number);
    case OP_TRACE:
        return write_trace(buffer, line, op, record);
    case OP_CONNECTION_STATUS:
        return write_connection_status(buffer, line, op, record);
    case OP_ENVIRON:
    case OP_NOTE:
        return write_variable(buffer, op, record);
    default:
        return UNSUPPORTED; /* read_op admits no other code */
    }
}

/* An escaped text of a Packed record (its UTF-8 is escaped as its str is). */
static int
write_packed_text(Buffer *buffer, Packed *packed, int which, int how)
{
    Py_ssize_t size;
    const char *text = packed_text(packed, which, &size);
    return escape_write(buffer, text, size, how);
}

/* write_connection_status for a Packed record, which has no response header fields. */
static int
write_packed_connection_status(Buffer *buffer, Line *line, const Op *op, Packed *packed)
{
    int close = 0, keep_alive = 0;
    int rc = find_packed_field(line, op, packed);
    if (rc < 0) {
        return rc;
    }
    if (rc == 0) {
        read_connection_tokens(line->scratch.data, line->scratch.length, &close, &keep_alive);
    }
    PackedValue completed;
    packed_extra(packed, EXTRAS_COMPLETED, &completed);
    if (completed.kind == PACKED_VALUE_FALSE) {
        return BUFFER_LITERAL(buffer, "X");
    }
    if (completed.kind != PACKED_VALUE_TRUE || close) {
        return BUFFER_LITERAL(buffer, "-");
    }
    Py_ssize_t size;
    const char *protocol = packed_text(packed, PACKED_PROTOCOL, &size);
    if (size == 8 && memcmp(protocol, "HTTP/1.0", 8) == 0 && !keep_alive) {
        return BUFFER_LITERAL(buffer, "-");
    }
    return BUFFER_LITERAL(buffer, "+");
}

/* write_op for a Packed record.  It has the shape packed_from_record packs (packed.h):
 * texts of the types the ops read, a float time and duration, request header fields
 * of a shape headers.h reads, extras of the usual kinds and no server variables, no
 * response header fields (those ops write what they write for None), and notes read
 * as a Record's. */
static int
write_packed_op(Buffer *buffer, Line *line, Op *op, Packed *packed)
{
    Py_ssize_t size;
    const char *text;
    TraceIds ids;
    switch (op->code) {
    case OP_TEXT:
        return buffer_write(buffer, PyBytes_AS_STRING(op->object), PyBytes_GET_SIZE(op->object));
    case OP_CLIENT:
        /* None and "" are "-" (both pack as no bytes). */
        text = packed_text(packed, PACKED_CLIENT, &size);
        return size == 0 ? BUFFER_LITERAL(buffer, "-")
                         : escape_write(buffer, text, size, ESCAPE_UNQUOTED);
    case OP_PATH:
        return write_packed_text(buffer, packed, PACKED_PATH, ESCAPE_QUOTED);
    case OP_QUERY:
        return write_packed_text(buffer, packed, PACKED_QUERY, ESCAPE_QUOTED);
    case OP_QUERY_MARK:
        packed_text(packed, PACKED_QUERY, &size);
        return size > 0 ? BUFFER_LITERAL(buffer, "?") : 0;
    case OP_METHOD:
        return write_packed_text(buffer, packed, PACKED_METHOD, ESCAPE_QUOTED);
    case OP_PROTOCOL:
        return write_packed_text(buffer, packed, PACKED_PROTOCOL, ESCAPE_QUOTED);
    case OP_STATUS:
        return buffer_write_decimal(buffer, packed->status);
    case OP_PID:
        return buffer_write_decimal(buffer, line->pid);
    case OP_TIME:
        return stamps_write_seconds(buffer, &op->stamps, op->object, packed->time);
    case OP_EPOCH:
    case OP_EPOCH_FRACTION:
        return write_epoch(buffer, packed->time, op->number, op->code == OP_EPOCH_FRACTION);
    case OP_BYTES:
    case OP_BYTES_OR_DASH: {
        text = packed_text(packed, PACKED_METHOD, &size);
        int head = size == 4 && memcmp(text, "HEAD", 4) == 0;
        long long sent = bytes_on_the_wire(head, packed->status, packed->sent);
        if (op->code == OP_BYTES_OR_DASH && sent == 0) {
            return BUFFER_LITERAL(buffer, "-");
        }
        return buffer_write_decimal(buffer, sent);
    }
    case OP_DURATION:
        return write_duration(buffer, packed->duration, op->number, 0);
    case OP_SECONDS_FRACTION:
        return write_duration(buffer, packed->duration, 1, 1);
    case OP_HEADER:
        if (op->number & HEADER_RESPONSE) {
            return BUFFER_LITERAL(buffer, "-"); /* none */
        }
        if (!(op->number & HEADER_REDACT)) {
            return headers_write_packed(buffer, packed, op->name, op->environ_key);
        }
        return write_redacted(buffer, find_packed_field(line, op, packed));
    case OP_USER:
        return write_user(buffer, line, op, find_packed_field(line, op, packed));
    case OP_TRACE: {
        /* The span's, else the traceparent field's, if it gives them. */
        if (trace_ids_from_packed(packed, &ids)) {
            return write_trace_ids(buffer, op, &ids);
        }
        int rc = find_packed_field(line, op, packed);
        if (rc < 0) {
            return rc;
        }
        int found = rc == 0 && trace_ids_from_header(line->scratch.data, line->scratch.length, &ids);
        return write_trace_ids(buffer, op, found ? &ids : NULL);
    }
    case OP_EXTRA: {
        PackedValue value;
        packed_extra(packed, (int)op->number, &value);
        return scalar_write_packed(buffer, &value, 0);
    }
    case OP_CONNECTION_STATUS:
        return write_packed_connection_status(buffer, line, op, packed);
    case OP_ENVIRON: /* no server variables (packed only without) */
        return BUFFER_LITERAL(buffer, "-");
    case OP_NOTE: {
        PyObject *value;
        int rc = extras_lookup(packed_notes(packed), op->object, &value);
        return write_found(buffer, rc, value);
    }
    default:
        return UNSUPPORTED; /* read_op admits no other code */
    }
}

static int
write_line(Buffer *buffer, Line *line, PyObject *record)
{
    if (packed_check(record)) {
        for (Py_ssize_t i = 0; i < line->count; i++) {
            int rc = write_packed_op(buffer, line, &line->ops[i], (Packed *)record);
            if (rc != 0) {
                return rc;
            }
        }
        return 0;
    }
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != FIELDS) {
        return UNSUPPORTED;
    }
    for (Py_ssize_t i = 0; i < line->count; i++) {
        int rc = write_op(buffer, line, &line->ops[i], record);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

PyObject *
template_format_template(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "format_template() takes 3 arguments");
        return NULL;
    }
    PyObject *ops = args[1];
    Line line = {NULL, 0, 0, {NULL, NULL, 0, 0}};
    if (!PyTuple_CheckExact(ops) || !PyLong_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "format_template(): ops must be a tuple, pid an int");
        return NULL;
    }
    line.pid = PyLong_AsLongLong(args[2]);
    if (line.pid == -1 && PyErr_Occurred()) {
        return NULL;
    }
    line.count = PyTuple_GET_SIZE(ops);
    line.ops = PyMem_Calloc(line.count > 0 ? (size_t)line.count : 1, sizeof(Op));
    if (line.ops == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < line.count; i++) {
        if (!read_op(PyTuple_GET_ITEM(ops, i), &line.ops[i])) {
            PyMem_Free(line.ops);
            return PyErr_Format(PyExc_TypeError,
                                "format_template(): op %zd is not a (code, number, object) "
                                "tuple of template.h's kinds",
                                i);
        }
    }
    /* A tuple of the records, each held: the caller's list may change meanwhile (a
     * list is copied under its lock on a free-threaded build). */
    PyObject *records = PySequence_Tuple(args[0]);
    if (records == NULL) {
        PyMem_Free(line.ops);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(records);
    Buffer buffer;
    /* A template's line is usually about as long as a combined one: 150 to 250 bytes. */
    if (buffer_init(&buffer, count * 192) < 0) {
        Py_DECREF(records);
        PyMem_Free(line.ops);
        return NULL;
    }
    int rc = buffer_init(&line.scratch, 64);
    for (Py_ssize_t i = 0; i < count && rc == 0; i++) {
        rc = write_line(&buffer, &line, PyTuple_GET_ITEM(records, i));
    }
    for (Py_ssize_t i = 0; i < line.count; i++) {
        stamps_clear(&line.ops[i].stamps);
    }
    buffer_free(&line.scratch);
    PyMem_Free(line.ops);
    Py_DECREF(records);
    return buffer_result(&buffer, rc);
}
