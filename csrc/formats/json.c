/* JSON lines, byte for byte those of _json.JsonFormat:
 *
 *   {"time":"2000-10-10T13:55:36.123-07:00","client":"::1","method":"GET","path":"/",
 *   "query":"","protocol":"HTTP/1.1","status":200,"bytes_sent":5,"duration_ms":0.412,
 *   "referer":null,"user_agent":"curl/8.0","request_id":null}
 *
 * with the keys, added header fields, fields of the record's extras and server
 * variables the format was built with (json.h), then the record's notes
 * (boundlog.add_fields) of the usual kinds.  Every string follows the JSON string rule
 * (escape.c); the stamp's text comes from the Python clock, once per distinct second
 * per batch.
 *
 * The same walk writes _logfmt.LogfmtFormat's lines, with ` key=` as the text before
 * each value: each value is then loosened where it was written (logfmt.h). */
#include "formats/json.h"

#include <math.h>

#include "common/buffer.h"
#include "common/compat.h"
#include "formats/escape.h"
#include "formats/headers.h"
#include "formats/logfmt.h"
#include "formats/scalar.h"
#include "formats/stamps.h"
#include "formats/trace.h"
#include "record/extras.h"
#include "record/packed.h"
#include "record/record.h"

/* The items of `texts` (json.h). */
enum { BEFORE_TIME, BEFORE_CLIENT, BEFORE_METHOD, BEFORE_PATH, BEFORE_QUERY, BEFORE_PROTOCOL,
       BEFORE_STATUS, BEFORE_SENT, BEFORE_DURATION, LINE_END, BEFORE_ROUTE, BEFORE_TRACE_ID,
       BEFORE_SPAN_ID, BEFORE_COMPLETED, TEXTS };
/* The first header fields of every line: referer, user_agent, request_id (json.h). */
#define BUILT_IN_HEADER_FIELDS 3
/* The items of `trace_header`. */
enum { TRACE_HEADER_NAME, TRACE_HEADER_ENVIRON_KEY, TRACE_HEADER_ITEMS };
/* The items of each of `extras_fields`: the text before it, and what it shows (an
 * index into the record's extras, or the name of a server variable). */
enum { ADDED_TEXT, ADDED_SOURCE, ADDED_ITEMS };
/* The items of each of `headers`. */
enum { HEADER_TEXT, HEADER_RESPONSE, HEADER_NAME, HEADER_ENVIRON_KEY, HEADER_REDACTION,
       HEADER_ITEMS };

/* Times: Rfc3339Clock.stamps, step for step.  It splits a batch's times column-wise
 * unless one is negative or rounds up to the next second; then it reads every time of
 * the batch as datetime does (Rfc3339Clock.__call__).  Both are copied here with the
 * same float operations, so that no millisecond can differ. */

/* The fraction of a second, in microseconds, from which datetime rounds up. */
#define ROUNDS_TO_NEXT_SECOND 999999.5
/* Larger float times are left to Python (the conversion to long long stays defined). */
#define LARGEST_TIME 1e15

/* Python's round(x) of a float: to the nearest integer, half to even. */
static double
python_round(double x)
{
    double rounded = round(x);
    if (fabs(x - rounded) == 0.5) {
        rounded = 2.0 * round(x / 2.0);
    }
    return rounded;
}

/* Checks every record's shape and time first, and says in *one_by_one whether the
 * clock would read the times one by one: 0, or UNSUPPORTED. */
static int
read_times(PyObject *records, int *one_by_one)
{
    *one_by_one = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(records); i++) {
        PyObject *record = PyTuple_GET_ITEM(records, i);
        int packed = packed_check(record);
        if (!packed && (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != FIELDS)) {
            return UNSUPPORTED;
        }
        PyObject *when = packed ? NULL : PyTuple_GET_ITEM(record, TIME);
        if (packed || PyFloat_CheckExact(when)) {
            /* A Packed record's time is a float's. */
            double t = packed ? ((Packed *)record)->time : PyFloat_AS_DOUBLE(when);
            /* NaN and infinities make Python raise: let it. */
            if (!(fabs(t) < LARGEST_TIME)) {
                return UNSUPPORTED;
            }
            if (t < 0 || (t - trunc(t)) * 1e6 >= ROUNDS_TO_NEXT_SECOND) {
                *one_by_one = 1;
            }
        }
        else if (PyLong_CheckExact(when)) {
            int overflow;
            long long second = PyLong_AsLongLongAndOverflow(when, &overflow);
            if (overflow) {
                return UNSUPPORTED;
            }
            if (second < 0) {
                *one_by_one = 1;
            }
        }
        else {
            return UNSUPPORTED;
        }
    }
    return 0;
}

/* The second and millisecond a float time (checked by read_times) is stamped with. */
static void
split_seconds(double t, int one_by_one, long long *second, int *millisecond)
{
    double whole = trunc(t);
    double fraction = t - whole;
    *second = (long long)whole;
    if (!one_by_one) {
        /* (fraction * 1e6 + 0.5) // 1000.0, as Rfc3339Clock.stamps: two statements, so
         * that no compiler fuses them into one multiply-add, which rounds once where
         * Python rounds twice.  Python's float // is exact (its fmod is): for x in
         * [0.5, 1e6) it is floor(x) // 1000 in integers. */
        double microseconds = fraction * 1e6;
        double rounded = microseconds + 0.5;
        *millisecond = (int)((long long)rounded / 1000);
        return;
    }
    /* _timestamps._second_and_microsecond, then microsecond // 1000. */
    long long microsecond = (long long)python_round(fraction * 1e6);
    if (microsecond >= 1000000) {
        *second += 1;
        microsecond -= 1000000;
    }
    else if (microsecond < 0) {
        *second -= 1;
        microsecond += 1000000;
    }
    *millisecond = (int)(microsecond / 1000);
}

/* The (before, after) parts of `second`'s stamp, borrowed from the cache (which holds
 * them for the batch); NULL with no exception set when the clock refused it. */
static PyObject *
stamp_parts(Stamps *stamps, PyObject *clock_parts, long long second)
{
    PyObject *kept = stamps_find(stamps, second);
    if (kept != NULL) {
        return kept;
    }
    PyObject *number = PyLong_FromLongLong(second);
    PyObject *parts = number == NULL ? NULL : PyObject_CallOneArg(clock_parts, number);
    Py_XDECREF(number);
    if (parts == NULL || !PyTuple_CheckExact(parts) || PyTuple_GET_SIZE(parts) != 2
        || !PyBytes_CheckExact(PyTuple_GET_ITEM(parts, 0))
        || !PyBytes_CheckExact(PyTuple_GET_ITEM(parts, 1))) {
        /* The reference raises the same error for this second (or does whatever an
         * odd clock makes it do): let it. */
        Py_XDECREF(parts);
        PyErr_Clear();
        return NULL;
    }
    stamps_keep(stamps, second, parts);
    return parts;
}

static int
write_bytes_object(Buffer *buffer, PyObject *bytes)
{
    return buffer_write(buffer, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

/* The second and millisecond a record's time (checked by read_times) is stamped with. */
static void
split_time(PyObject *when, int one_by_one, long long *second, int *millisecond)
{
    if (PyLong_CheckExact(when)) {
        /* A fraction of 0: both ways give millisecond 0. */
        *second = PyLong_AsLongLong(when);
        *millisecond = 0;
        return;
    }
    split_seconds(PyFloat_AS_DOUBLE(when), one_by_one, second, millisecond);
}

/* Appends the stamp of a second and millisecond: the text before the milliseconds,
 * them, the rest. */
static int
write_stamp(Buffer *buffer, Stamps *stamps, PyObject *clock_parts, long long second,
            int millisecond)
{
    PyObject *parts = stamp_parts(stamps, clock_parts, second);
    if (parts == NULL) {
        return UNSUPPORTED;
    }
    char digits[3] = {(char)('0' + millisecond / 100), (char)('0' + millisecond / 10 % 10),
                      (char)('0' + millisecond % 10)};
    if (write_bytes_object(buffer, PyTuple_GET_ITEM(parts, 0)) < 0
        || buffer_write(buffer, digits, 3) < 0
        || write_bytes_object(buffer, PyTuple_GET_ITEM(parts, 1)) < 0) {
        return -1;
    }
    return 0;
}

/* Appends "%.3f" % milliseconds, or null when it is not finite (_json_milliseconds). */
static int
write_milliseconds(Buffer *buffer, double milliseconds)
{
    if (!isfinite(milliseconds)) {
        return BUFFER_LITERAL(buffer, "null");
    }
    if (milliseconds >= 0 && !signbit(milliseconds) && milliseconds < 1e9) {
        /* The number of thousandths, rounded half to even from the exact product: it
         * is p + e, both exact (fma), |e| at most half a unit of p's last place.  Below
         * 2**52 the distance of p's fraction d from one half is 0 or at least a unit of
         * that place, so e decides only a tie. */
        double p = milliseconds * 1000.0;
        double e = fma(milliseconds, 1000.0, -p);
        double whole = floor(p);
        double d = p - whole;
        long long n = (long long)whole;
        if (d > 0.5 || (d == 0.5 && (e > 0 || (e == 0 && (n & 1))))) {
            n += 1;
        }
        if (buffer_write_decimal(buffer, n / 1000) < 0 || buffer_reserve(buffer, 4) < 0) {
            return -1;
        }
        int thousandths = (int)(n % 1000);
        char fraction[4] = {'.', (char)('0' + thousandths / 100),
                            (char)('0' + thousandths / 10 % 10), (char)('0' + thousandths % 10)};
        buffer_put(buffer, fraction, 4);
        return 0;
    }
    /* Python's own formatting of "%.3f" (negative, or very large). */
    return buffer_write_double(buffer, milliseconds, 'f', 3, 0);
}

/* What ends the writing of a value, with `rc` what writing it returned: in a logfmt
 * line, the value written from `value` on is loosened, its key's text starting at
 * `start` (logfmt.h); a JSON line's stays as it is.  Returns `rc`. */
static int
end_value(Buffer *buffer, int logfmt, Py_ssize_t start, Py_ssize_t value, int rc)
{
    if (rc == 0 && logfmt) {
        logfmt_loosen(buffer, start, value);
    }
    return rc;
}

/* Appends a text field (client, method, protocol) as _json._json_text: null for None,
 * else its UTF-8 bytes (surrogatepass) as a JSON string. */
static int
write_json_text(Buffer *buffer, PyObject *text)
{
    if (text == Py_None) {
        return BUFFER_LITERAL(buffer, "null");
    }
    return escape_json_text_write(buffer, text);
}

/* Appends a bytes field (path, query) as _json._json_bytes: null for None. */
static int
write_json_bytes(Buffer *buffer, PyObject *bytes)
{
    if (bytes == Py_None) {
        return BUFFER_LITERAL(buffer, "null");
    }
    return escape_json_write(buffer, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

/* Appends `before` and `value` written by `write` (0, -1 or UNSUPPORTED), the value
 * loosened in a logfmt line. */
static int
write_field(Buffer *buffer, int logfmt, PyObject *before, int (*write)(Buffer *, PyObject *),
            PyObject *value)
{
    Py_ssize_t start = buffer->length;
    if (write_bytes_object(buffer, before) < 0) {
        return -1;
    }
    Py_ssize_t written = buffer->length;
    return end_value(buffer, logfmt, start, written, write(buffer, value));
}

/* Appends the text before a header field and the field: null when absent, else its
 * value (repeats joined, gathered in `scratch` first: whether it is valid UTF-8 is
 * decided for the whole) as a JSON string, or the redaction.  0, -1 or UNSUPPORTED. */
static int
write_header(Buffer *buffer, Buffer *scratch, PyObject *record, PyObject *field, int logfmt)
{
    int response = PyTuple_GET_ITEM(field, HEADER_RESPONSE) == Py_True;
    PyObject *redaction = PyTuple_GET_ITEM(field, HEADER_REDACTION);
    scratch->length = 0;
    int rc;
    if (packed_check(record)) {
        /* A Packed record has no response header fields. */
        rc = response ? HEADERS_ABSENT
                      : headers_find_packed(scratch, (Packed *)record,
                                            PyTuple_GET_ITEM(field, HEADER_NAME),
                                            PyTuple_GET_ITEM(field, HEADER_ENVIRON_KEY),
                                            buffer_write);
    }
    else {
        PyObject *source = PyTuple_GET_ITEM(record, response ? RESPONSE_HEADERS : REQUEST_HEADERS);
        rc = headers_find(scratch, source, PyTuple_GET_ITEM(field, HEADER_NAME),
                          PyTuple_GET_ITEM(field, HEADER_ENVIRON_KEY), buffer_write);
    }
    if (rc == -1 || rc == HEADERS_UNSUPPORTED) {
        return rc;
    }
    Py_ssize_t start = buffer->length;
    if (write_bytes_object(buffer, PyTuple_GET_ITEM(field, HEADER_TEXT)) < 0) {
        return -1;
    }
    Py_ssize_t value = buffer->length;
    rc = rc == HEADERS_ABSENT   ? BUFFER_LITERAL(buffer, "null")
         : redaction != Py_None ? write_bytes_object(buffer, redaction)
                                : escape_json_write(buffer, scratch->data, scratch->length);
    return end_value(buffer, logfmt, start, value, rc);
}

/* Appends a record's notes as JsonFormat._notes_text does, before the line's end:
 * ,"key":value for each, in order.  0, -1, or UNSUPPORTED for notes that are not an
 * exact dict, a key that is not an exact str or that is one of `taken` (the reference
 * prefixes it), or a value scalar_write_json leaves. */
static int
write_notes(Buffer *buffer, PyObject *notes, PyObject *taken, int logfmt)
{
    if (notes == Py_None) {
        return 0;
    }
    if (!PyDict_CheckExact(notes)) {
        return UNSUPPORTED;
    }
    int rc = 0;
    PyObject *key, *value;
    Py_ssize_t position = 0;
    /* A record's notes are the middleware's copy, which nothing changes; a dict given
     * by hand is read inside its critical section.  No Python code runs here. */
    Py_BEGIN_CRITICAL_SECTION(notes);
    while (rc == 0 && PyDict_Next(notes, &position, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            rc = UNSUPPORTED;
            break;
        }
        int clash = PySet_Contains(taken, key);
        rc = clash < 0 ? -1 : clash || (logfmt && !logfmt_is_key(key)) ? UNSUPPORTED : 0;
        if (rc == 0) {
            Py_ssize_t start = buffer->length;
            /* A logfmt key is ASCII (logfmt_is_key): its characters are its bytes. */
            rc = logfmt ? BUFFER_LITERAL(buffer, " ") < 0
                              || buffer_write(buffer, (const char *)PyUnicode_1BYTE_DATA(key),
                                              PyUnicode_GET_LENGTH(key)) < 0
                              || BUFFER_LITERAL(buffer, "=") < 0
                        : BUFFER_LITERAL(buffer, ",") < 0 || write_json_text(buffer, key) < 0
                              || BUFFER_LITERAL(buffer, ":") < 0;
            if (rc != 0) {
                rc = -1;
                break;
            }
            Py_ssize_t written = buffer->length;
            /* Held while it is written: bytes' str() may run Python code (a warning). */
            Py_INCREF(value);
            rc = end_value(buffer, logfmt, start, written, scalar_write_json(buffer, value));
            Py_DECREF(value);
        }
    }
    Py_END_CRITICAL_SECTION();
    return rc;
}

/* A value of a record (an object) or of a Packed record, as scalar.h writes it. */
typedef struct {
    PyObject *object; /* NULL: `packed` */
    PackedValue packed;
} Scalar;

static int
write_scalar(Buffer *buffer, const Scalar *value)
{
    return value->object != NULL ? scalar_write_json(buffer, value->object)
                                 : scalar_write_packed(buffer, &value->packed, 1);
}

/* write_field for a Scalar. */
static int
write_scalar_field(Buffer *buffer, int logfmt, PyObject *before, const Scalar *value)
{
    Py_ssize_t start = buffer->length;
    if (write_bytes_object(buffer, before) < 0) {
        return -1;
    }
    Py_ssize_t written = buffer->length;
    return end_value(buffer, logfmt, start, written, write_scalar(buffer, value));
}

/* The route, completion and trace ids of a record (a Record or a Packed one): 0, -1,
 * or UNSUPPORTED for extras that are not a tuple of Extras's size, or request headers
 * the traceparent lookup leaves.  The ids are the span's, else the traceparent
 * field's. */
static int
read_extras(Buffer *scratch, PyObject *record, PyObject *trace_header, Scalar *route,
            Scalar *completed, TraceIds *ids, int *found)
{
    PyObject *name = PyTuple_GET_ITEM(trace_header, TRACE_HEADER_NAME);
    PyObject *environ_key = PyTuple_GET_ITEM(trace_header, TRACE_HEADER_ENVIRON_KEY);
    if (packed_check(record)) {
        Packed *packed = (Packed *)record;
        route->object = completed->object = NULL;
        packed_extra(packed, EXTRAS_ROUTE, &route->packed);
        packed_extra(packed, EXTRAS_COMPLETED, &completed->packed);
        *found = trace_ids_from_packed(packed, ids);
        if (*found) {
            return 0; /* its header fields are always of a shape the lookup reads */
        }
        scratch->length = 0;
        int rc = headers_find_packed(scratch, packed, name, environ_key, buffer_write);
        *found = rc == 0 && trace_ids_from_header(scratch->data, scratch->length, ids);
        return rc < 0 ? rc : 0;
    }
    PyObject *extras = PyTuple_GET_ITEM(record, EXTRAS);
    PyObject *trace = Py_None;
    route->object = completed->object = Py_None;
    if (extras != Py_None) {
        if (!PyTuple_Check(extras) || PyTuple_GET_SIZE(extras) != EXTRAS_FIELDS) {
            return UNSUPPORTED;
        }
        route->object = PyTuple_GET_ITEM(extras, EXTRAS_ROUTE);
        trace = PyTuple_GET_ITEM(extras, EXTRAS_TRACE);
        completed->object = PyTuple_GET_ITEM(extras, EXTRAS_COMPLETED);
    }
    *found = trace_ids_from_span(trace, ids);
    if (*found) {
        return 0;
    }
    return trace_ids_from_headers(scratch, PyTuple_GET_ITEM(record, REQUEST_HEADERS), name,
                                  environ_key, ids, found);
}

/* Appends an id: the text before it, then null or its hex digits in quotes (loosened
 * to the digits). */
static int
write_id(Buffer *buffer, int logfmt, PyObject *before, const char *digits, int size)
{
    Py_ssize_t start = buffer->length;
    if (write_bytes_object(buffer, before) < 0) {
        return -1;
    }
    Py_ssize_t value = buffer->length;
    int rc = digits != NULL ? BUFFER_LITERAL(buffer, "\"") < 0 || buffer_write(buffer, digits, size) < 0
                                  || BUFFER_LITERAL(buffer, "\"") < 0
                            : BUFFER_LITERAL(buffer, "null") < 0;
    return end_value(buffer, logfmt, start, value, rc ? -1 : 0);
}

/* Appends a line's route, trace id, span id and completion, each with the text before
 * it, as JsonFormat._extras_text does (a route and a completion as scalar.h writes
 * them, which for a str is what _json_text writes): 0, -1, or UNSUPPORTED for extras
 * read_extras leaves, or a route or a completion scalar.h leaves. */
static int
write_extras(Buffer *buffer, Buffer *scratch, PyObject *record, PyObject *texts,
             PyObject *trace_header, int logfmt)
{
    Scalar route, completed;
    TraceIds ids;
    int found;
    int rc = read_extras(scratch, record, trace_header, &route, &completed, &ids, &found);
    if (rc == 0) {
        rc = write_scalar_field(buffer, logfmt, PyTuple_GET_ITEM(texts, BEFORE_ROUTE), &route);
    }
    if (rc != 0) {
        return rc;
    }
    if (write_id(buffer, logfmt, PyTuple_GET_ITEM(texts, BEFORE_TRACE_ID),
                 found ? ids.trace_id : NULL, 32) < 0
        || write_id(buffer, logfmt, PyTuple_GET_ITEM(texts, BEFORE_SPAN_ID),
                    found ? ids.span_id : NULL, 16) < 0) {
        return -1;
    }
    return write_scalar_field(buffer, logfmt, PyTuple_GET_ITEM(texts, BEFORE_COMPLETED),
                              &completed);
}

/* Appends the fields a format adds from a record's extras (`extras_fields`), each
 * with the text before it, as JsonFormat._extras_text does after the completion: a
 * field of the extras, or a server variable of their environ, null when there is
 * none.  0, -1, or UNSUPPORTED for extras or a value this code does not read. */
static int
write_extras_fields(Buffer *buffer, PyObject *record, PyObject *extras_fields, int logfmt)
{
    int packed = packed_check(record);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(extras_fields); i++) {
        PyObject *field = PyTuple_GET_ITEM(extras_fields, i);
        PyObject *source = PyTuple_GET_ITEM(field, ADDED_SOURCE);
        Py_ssize_t start = buffer->length;
        if (write_bytes_object(buffer, PyTuple_GET_ITEM(field, ADDED_TEXT)) < 0) {
            return -1;
        }
        Py_ssize_t written = buffer->length;
        int rc;
        if (packed) {
            /* A Packed record's environ is None: no variable. */
            PackedValue value = {PACKED_VALUE_NONE, 0, NULL, 0};
            if (PyLong_CheckExact(source)) {
                packed_extra((Packed *)record, (int)PyLong_AsLong(source), &value);
            }
            rc = scalar_write_packed(buffer, &value, 1);
        }
        else if (PyLong_CheckExact(source)) {
            PyObject *value;
            rc = extras_field(record, (int)PyLong_AsLong(source), &value);
            if (rc == 0) {
                rc = scalar_write_json(buffer, value);
            }
        }
        else {
            PyObject *value;
            rc = extras_environ_value(record, source, &value);
            if (rc == 0) {
                rc = value == NULL ? BUFFER_LITERAL(buffer, "null")
                                   : scalar_write_json(buffer, value);
                Py_XDECREF(value);
            }
        }
        rc = end_value(buffer, logfmt, start, written, rc);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static int
is_text_or_none(PyObject *value)
{
    return value == Py_None || PyUnicode_CheckExact(value);
}

static int
is_bytes_or_none(PyObject *value)
{
    return value == Py_None || PyBytes_CheckExact(value);
}

/* Everything a line is built from besides its record. */
typedef struct {
    PyObject *clock_parts;
    PyObject *texts;   /* a tuple of TEXTS bytes */
    PyObject *headers; /* a tuple of HEADER_ITEMS-tuples */
    PyObject *taken;   /* a frozenset: the keys a note must not have */
    PyObject *trace_header; /* (name, environ key) of the traceparent field */
    PyObject *extras_fields; /* a tuple of ADDED_ITEMS-tuples */
    int one_by_one;    /* how the clock reads this batch's times (read_times) */
    int logfmt;        /* 1: a logfmt line, whose values are loosened (logfmt.h) */
} Line;

#define TEXT(line, i) PyTuple_GET_ITEM((line)->texts, (i))

/* Appends the duration (null when it is not finite) with the text before it. */
static int
write_duration(Buffer *buffer, const Line *line, double duration)
{
    double milliseconds = duration * 1000.0;
    Py_ssize_t start = buffer->length;
    if (write_bytes_object(buffer, TEXT(line, BEFORE_DURATION)) < 0) {
        return -1;
    }
    Py_ssize_t value = buffer->length;
    return end_value(buffer, line->logfmt, start, value, write_milliseconds(buffer, milliseconds));
}

/* Appends the status and the bytes sent, with the texts before them. */
static int
write_status_and_sent(Buffer *buffer, const Line *line, long long status, long long sent)
{
    if (write_bytes_object(buffer, TEXT(line, BEFORE_STATUS)) < 0
        || buffer_write_decimal(buffer, status) < 0
        || write_bytes_object(buffer, TEXT(line, BEFORE_SENT)) < 0
        || buffer_write_decimal(buffer, sent) < 0) {
        return -1;
    }
    return 0;
}

/* A text of a Packed record as a JSON string (its UTF-8 is written as its str or bytes
 * are), with the text before it. */
static int
write_packed_text(Buffer *buffer, const Line *line, int before, Packed *packed, int which)
{
    PackedValue value = {PACKED_VALUE_TEXT, 0, NULL, 0};
    value.text = packed_text(packed, which, &value.size);
    if (which == PACKED_CLIENT && (packed->flags & PACKED_NO_CLIENT)) {
        value.kind = PACKED_VALUE_NONE; /* null */
    }
    Scalar scalar = {NULL, value};
    return write_scalar_field(buffer, line->logfmt, TEXT(line, before), &scalar);
}

/* The start of a Packed record's line, up to its duration (write_record_start). */
static int
write_packed_start(Buffer *buffer, Stamps *stamps, const Line *line, Packed *packed)
{
    long long second;
    int millisecond;
    split_seconds(packed->time, line->one_by_one, &second, &millisecond);
    if (write_bytes_object(buffer, TEXT(line, BEFORE_TIME)) < 0) {
        return -1;
    }
    int rc = write_stamp(buffer, stamps, line->clock_parts, second, millisecond);
    if (rc != 0) {
        return rc;
    }
    Py_ssize_t size;
    const char *method = packed_text(packed, PACKED_METHOD, &size);
    int head = size == 4 && memcmp(method, "HEAD", 4) == 0;
    if (write_packed_text(buffer, line, BEFORE_CLIENT, packed, PACKED_CLIENT) < 0
        || write_packed_text(buffer, line, BEFORE_METHOD, packed, PACKED_METHOD) < 0
        || write_packed_text(buffer, line, BEFORE_PATH, packed, PACKED_PATH) < 0
        || write_packed_text(buffer, line, BEFORE_QUERY, packed, PACKED_QUERY) < 0
        || write_packed_text(buffer, line, BEFORE_PROTOCOL, packed, PACKED_PROTOCOL) < 0
        || write_status_and_sent(buffer, line, packed->status,
                                 bytes_on_the_wire(head, packed->status, packed->sent)) < 0) {
        return -1;
    }
    return write_duration(buffer, line, packed->duration);
}

/* The start of a record's line, up to its duration: 0, -1 with an exception set, or
 * UNSUPPORTED.  The record is held by the caller and a tuple's items cannot change:
 * they may be borrowed. */
static int
write_record_start(Buffer *buffer, Stamps *stamps, const Line *line, PyObject *record)
{
    PyObject *duration_field = PyTuple_GET_ITEM(record, DURATION);
    PyObject *client = PyTuple_GET_ITEM(record, CLIENT);
    PyObject *method = PyTuple_GET_ITEM(record, METHOD);
    PyObject *path = PyTuple_GET_ITEM(record, PATH);
    PyObject *query = PyTuple_GET_ITEM(record, QUERY);
    PyObject *protocol = PyTuple_GET_ITEM(record, PROTOCOL);
    /* Exact types only: a subclass could change how the reference reads a value.  None
     * is null wherever the reference makes it null. */
    long long status, sent;
    if (!is_text_or_none(client) || !is_text_or_none(method) || !is_bytes_or_none(path)
        || !is_bytes_or_none(query) || !is_text_or_none(protocol)
        || record_status_and_sent(record, &status, &sent) != 0) {
        return UNSUPPORTED;
    }
    double duration;
    if (record_double(duration_field, &duration) != 0) {
        return UNSUPPORTED;
    }
    long long second;
    int millisecond;
    split_time(PyTuple_GET_ITEM(record, TIME), line->one_by_one, &second, &millisecond);
    if (write_bytes_object(buffer, TEXT(line, BEFORE_TIME)) < 0) {
        return -1;
    }
    int rc = write_stamp(buffer, stamps, line->clock_parts, second, millisecond);
    if (rc != 0) {
        return rc;
    }
    int logfmt = line->logfmt;
    if (write_field(buffer, logfmt, TEXT(line, BEFORE_CLIENT), write_json_text, client) < 0
        || write_field(buffer, logfmt, TEXT(line, BEFORE_METHOD), write_json_text, method) < 0
        || write_field(buffer, logfmt, TEXT(line, BEFORE_PATH), write_json_bytes, path) < 0
        || write_field(buffer, logfmt, TEXT(line, BEFORE_QUERY), write_json_bytes, query) < 0
        || write_field(buffer, logfmt, TEXT(line, BEFORE_PROTOCOL), write_json_text, protocol) < 0
        || write_status_and_sent(buffer, line, status,
                                 record_bytes_on_the_wire(method, status, sent)) < 0) {
        return -1;
    }
    return write_duration(buffer, line, duration);
}

/* Appends one record's line (a Record or a Packed one): 0, -1 with an exception set,
 * or UNSUPPORTED. */
static int
write_line(Buffer *buffer, Buffer *scratch, Stamps *stamps, const Line *line, PyObject *record)
{
    int packed = packed_check(record);
    int rc = packed ? write_packed_start(buffer, stamps, line, (Packed *)record)
                    : write_record_start(buffer, stamps, line, record);
    if (rc != 0) {
        return rc;
    }
    int logfmt = line->logfmt;
    /* The route and trace ids follow the built-in header fields. */
    Py_ssize_t headers = PyTuple_GET_SIZE(line->headers);
    for (Py_ssize_t i = 0; i <= headers; i++) {
        if (i == (headers < BUILT_IN_HEADER_FIELDS ? headers : BUILT_IN_HEADER_FIELDS)) {
            rc = write_extras(buffer, scratch, record, line->texts, line->trace_header, logfmt);
            if (rc == 0) {
                rc = write_extras_fields(buffer, record, line->extras_fields, logfmt);
            }
            if (rc != 0) {
                return rc;
            }
        }
        rc = i < headers ? write_header(buffer, scratch, record,
                                        PyTuple_GET_ITEM(line->headers, i), logfmt)
                         : 0;
        if (rc != 0) {
            return rc;
        }
    }
    rc = write_notes(buffer,
                     packed ? packed_notes((Packed *)record) : PyTuple_GET_ITEM(record, NOTES),
                     line->taken, logfmt);
    if (rc != 0) {
        return rc;
    }
    return write_bytes_object(buffer, TEXT(line, LINE_END));
}

/* Whether `extras_fields` has the shape json.h gives. */
static int
check_extras_fields(PyObject *extras_fields)
{
    if (!PyTuple_CheckExact(extras_fields)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(extras_fields); i++) {
        PyObject *field = PyTuple_GET_ITEM(extras_fields, i);
        if (!PyTuple_CheckExact(field) || PyTuple_GET_SIZE(field) != ADDED_ITEMS
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(field, ADDED_TEXT))) {
            return 0;
        }
        PyObject *source = PyTuple_GET_ITEM(field, ADDED_SOURCE);
        if (PyLong_CheckExact(source)) {
            long index = PyLong_AsLong(source);
            if (index < 0 || index >= EXTRAS_FIELDS) {
                PyErr_Clear(); /* an OverflowError: refused all the same */
                return 0;
            }
        }
        else if (!PyUnicode_CheckExact(source)) {
            return 0;
        }
    }
    return 1;
}

/* Whether the arguments other than the records have the shapes json.h gives. */
static int
check_arguments(PyObject *texts, PyObject *headers, PyObject *trace_header)
{
    if (!PyTuple_CheckExact(texts) || PyTuple_GET_SIZE(texts) != TEXTS
        || !PyTuple_CheckExact(headers) || !PyTuple_CheckExact(trace_header)
        || PyTuple_GET_SIZE(trace_header) != TRACE_HEADER_ITEMS
        || !PyBytes_CheckExact(PyTuple_GET_ITEM(trace_header, TRACE_HEADER_NAME))
        || !PyUnicode_CheckExact(PyTuple_GET_ITEM(trace_header, TRACE_HEADER_ENVIRON_KEY))) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < TEXTS; i++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(texts, i))) {
            return 0;
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(headers); i++) {
        PyObject *field = PyTuple_GET_ITEM(headers, i);
        if (!PyTuple_CheckExact(field) || PyTuple_GET_SIZE(field) != HEADER_ITEMS
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(field, HEADER_TEXT))
            || !PyBool_Check(PyTuple_GET_ITEM(field, HEADER_RESPONSE))
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(field, HEADER_NAME))
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(field, HEADER_ENVIRON_KEY))
            || !is_bytes_or_none(PyTuple_GET_ITEM(field, HEADER_REDACTION))) {
            return 0;
        }
    }
    return 1;
}

/* format_json and format_logfmt (json.h): the lines of a batch in either style. */
static PyObject *
format_lines(PyObject *const *args, Py_ssize_t nargs, int logfmt)
{
    const char *name = logfmt ? "format_logfmt" : "format_json";
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "%s() takes 7 arguments", name);
        return NULL;
    }
    if (!check_arguments(args[2], args[3], args[5]) || !PyFrozenSet_CheckExact(args[4])
        || !check_extras_fields(args[6])) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): texts must be a tuple of 14 bytes, headers a tuple "
                     "of (bytes, bool, bytes, str, bytes | None) tuples, taken a "
                     "frozenset, trace_header a (bytes, str) tuple and extras_fields a "
                     "tuple of (bytes, int | str) tuples, each int an index of Extras",
                     name);
        return NULL;
    }
    Line line = {args[1], args[2], args[3], args[4], args[5], args[6], 0, logfmt};
    /* A tuple of the records, each held: the caller's list may change meanwhile (a
     * list is copied under its lock on a free-threaded build). */
    PyObject *records = PySequence_Tuple(args[0]);
    if (records == NULL) {
        return NULL;
    }
    if (read_times(records, &line.one_by_one) != 0) {
        Py_DECREF(records);
        Py_RETURN_NONE;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(records);
    Buffer buffer, scratch;
    /* A default JSON line is about 250 to 350 bytes. */
    if (buffer_init(&buffer, count * 320) < 0) {
        Py_DECREF(records);
        return NULL;
    }
    if (buffer_init(&scratch, 256) < 0) {
        buffer_free(&buffer);
        Py_DECREF(records);
        return NULL;
    }
    Stamps stamps = STAMPS_INIT;
    int rc = 0;
    for (Py_ssize_t i = 0; i < count && rc == 0; i++) {
        rc = write_line(&buffer, &scratch, &stamps, &line, PyTuple_GET_ITEM(records, i));
    }
    stamps_clear(&stamps);
    buffer_free(&scratch);
    Py_DECREF(records);
    return buffer_result(&buffer, rc);
}

PyObject *
json_format_json(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    return format_lines(args, nargs, 0);
}

PyObject *
json_format_logfmt(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    return format_lines(args, nargs, 1);
}
