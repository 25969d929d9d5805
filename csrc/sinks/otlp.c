/* A LogRecord in protobuf from an `otel` preset line (otlp.h).
 *
 * Wire format, as _protobuf.py says it: a field is a key (number << 3 | wire type, a
 * varint) and its value; a message or a string inside another is length-delimited, its
 * length a varint before it.  The length is known only once the inner message is
 * written, so each nested message is written after one byte kept for its length (most
 * are under 128 bytes), and moved right in the rare case its length needs more.
 *
 * Every encoder returns 0 when it wrote its value, 1 when the value is one left to the
 * pure-Python core (the whole record then is), and -1 with an exception set. */
#include "sinks/otlp.h"

#include "common/buffer.h"
#include "common/compat.h"

enum { VARINT = 0, FIXED64 = 1, LENGTH_DELIMITED = 2 };

static int
varint_size(unsigned long long value)
{
    int size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

/* Only after buffer_reserve() made room for 10 bytes. */
static void
put_varint(Buffer *buffer, unsigned long long value)
{
    while (value >= 0x80) {
        buffer->data[buffer->length++] = (char)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    buffer->data[buffer->length++] = (char)value;
}

static int
write_varint(Buffer *buffer, unsigned long long value)
{
    if (buffer_reserve(buffer, 10) < 0) {
        return -1;
    }
    put_varint(buffer, value);
    return 0;
}

static int
write_key(Buffer *buffer, int number, int wire_type)
{
    return write_varint(buffer, (unsigned long long)(number << 3 | wire_type));
}

static int
write_fixed64(Buffer *buffer, int number, unsigned long long value)
{
    if (buffer_reserve(buffer, 10 + 8) < 0) {
        return -1;
    }
    put_varint(buffer, (unsigned long long)(number << 3 | FIXED64));
    for (int i = 0; i < 8; i++) {
        buffer->data[buffer->length++] = (char)(value >> (8 * i) & 0xFF);
    }
    return 0;
}

static int
write_length_delimited(Buffer *buffer, int number, const char *data, Py_ssize_t size)
{
    if (buffer_reserve(buffer, 20 + size) < 0) {
        return -1;
    }
    put_varint(buffer, (unsigned long long)(number << 3 | LENGTH_DELIMITED));
    put_varint(buffer, (unsigned long long)size);
    buffer_put(buffer, data, size);
    return 0;
}

/* Starts message field `number`: its key, and one byte kept for its length.  *start
 * is where that byte is (an offset: the buffer may move as it grows). */
static int
begin_message(Buffer *buffer, int number, Py_ssize_t *start)
{
    if (write_key(buffer, number, LENGTH_DELIMITED) < 0 || buffer_reserve(buffer, 1) < 0) {
        return -1;
    }
    *start = buffer->length++;
    return 0;
}

/* Ends the message begun at `start`: writes its length, moving it right when the
 * length takes more than the byte kept. */
static int
end_message(Buffer *buffer, Py_ssize_t start)
{
    Py_ssize_t size = buffer->length - start - 1;
    int extra = varint_size((unsigned long long)size) - 1;
    if (extra > 0) {
        if (buffer_reserve(buffer, extra) < 0) {
            return -1;
        }
        memmove(buffer->data + start + 1 + extra, buffer->data + start + 1, (size_t)size);
        buffer->length += extra;
    }
    Py_ssize_t end = buffer->length;
    buffer->length = start;
    put_varint(buffer, (unsigned long long)size);
    buffer->length = end;
    return 0;
}

/* A str as a string field's payload: its UTF-8, a lone surrogate as its \udxxx escape
 * (string_field's "backslashreplace"). */
static int
write_text(Buffer *buffer, int number, PyObject *text, int even_empty)
{
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (utf8 != NULL) {
        if (size == 0 && !even_empty) {
            return 0;
        }
        return write_length_delimited(buffer, number, utf8, size);
    }
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        return -1;
    }
    PyErr_Clear();
    PyObject *encoded = PyUnicode_AsEncodedString(text, "utf-8", "backslashreplace");
    if (encoded == NULL) {
        return -1;
    }
    int rc = write_length_delimited(buffer, number, PyBytes_AS_STRING(encoded),
                                    PyBytes_GET_SIZE(encoded));
    Py_DECREF(encoded);
    return rc;
}

static int write_any_value(Buffer *buffer, PyObject *value, int depth);

/* Each (name, value) of `dict` as a KeyValue field `number`, None values left out
 * (_logs._key_values). */
static int
write_key_values(Buffer *buffer, int number, PyObject *dict, int depth)
{
    int rc = 0;
    /* The dicts come from json.loads on this thread; the critical section is for any
     * other, and each item is held strongly while it is written. */
    Py_BEGIN_CRITICAL_SECTION(dict);
    Py_ssize_t position = 0;
    PyObject *borrowed_name, *borrowed_value;
    while (rc == 0 && PyDict_Next(dict, &position, &borrowed_name, &borrowed_value)) {
        if (borrowed_value == Py_None) {
            continue;
        }
        if (!PyUnicode_CheckExact(borrowed_name)) {
            rc = 1;
            break;
        }
        PyObject *name = Py_NewRef(borrowed_name);
        PyObject *value = Py_NewRef(borrowed_value);
        Py_ssize_t start, inner;
        /* KeyValue { string key = 1; AnyValue value = 2 } */
        if (begin_message(buffer, number, &start) < 0 || write_text(buffer, 1, name, 0) < 0
            || begin_message(buffer, 2, &inner) < 0) {
            rc = -1;
        }
        else {
            rc = write_any_value(buffer, value, depth + 1);
            if (rc == 0 && (end_message(buffer, inner) < 0 || end_message(buffer, start) < 0)) {
                rc = -1;
            }
        }
        Py_DECREF(name);
        Py_DECREF(value);
    }
    Py_END_CRITICAL_SECTION();
    return rc;
}

static int
write_array(Buffer *buffer, PyObject *list, int depth)
{
    /* ArrayValue { repeated AnyValue values = 1 } */
    for (Py_ssize_t i = 0;; i++) {
        PyObject *item = sequence_item_ref(list, i);
        if (item == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        Py_ssize_t start;
        int rc = begin_message(buffer, 1, &start);
        if (rc == 0) {
            rc = write_any_value(buffer, item, depth + 1);
        }
        if (rc == 0) {
            rc = end_message(buffer, start);
        }
        Py_DECREF(item);
        if (rc != 0) {
            return rc;
        }
    }
}

/* The fields of an AnyValue holding `value` (_logs.any_value): None writes none. */
static int
write_any_value(Buffer *buffer, PyObject *value, int depth)
{
    if (depth > OTLP_MOST_DEPTH) {
        return 1;
    }
    if (PyUnicode_CheckExact(value)) {
        return write_text(buffer, 1, value, 1);
    }
    if (PyBool_Check(value)) {
        if (write_key(buffer, 2, VARINT) < 0) {
            return -1;
        }
        return write_varint(buffer, value == Py_True);
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (number == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow) {
            /* Beyond int64: its decimal text, which loses nothing. */
            PyObject *text = PyObject_Str(value);
            if (text == NULL) {
                return -1;
            }
            int rc = write_text(buffer, 1, text, 1);
            Py_DECREF(text);
            return rc;
        }
        if (write_key(buffer, 3, VARINT) < 0) {
            return -1;
        }
        /* A negative int64 as its two's complement: ten bytes. */
        return write_varint(buffer, (unsigned long long)number);
    }
    if (PyFloat_CheckExact(value)) {
        double number = PyFloat_AS_DOUBLE(value);
        unsigned long long bits;
        memcpy(&bits, &number, sizeof bits);
        return write_fixed64(buffer, 4, bits);
    }
    if (PyList_CheckExact(value)) {
        Py_ssize_t start;
        if (begin_message(buffer, 5, &start) < 0) {
            return -1;
        }
        int rc = write_array(buffer, value, depth);
        return rc != 0 ? rc : end_message(buffer, start);
    }
    if (PyDict_CheckExact(value)) {
        /* KeyValueList { repeated KeyValue values = 1 } */
        Py_ssize_t start;
        if (begin_message(buffer, 6, &start) < 0) {
            return -1;
        }
        int rc = write_key_values(buffer, 1, value, depth);
        return rc != 0 ? rc : end_message(buffer, start);
    }
    return value == Py_None ? 0 : 1;
}

static int
hex_digit(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* A trace or span id's hex as bytes field `number` (bytes.fromhex, left out when
 * empty); 1 for text that is not an even run of hex digits (fromhex's spaces and
 * errors are the reference's). */
static int
write_id(Buffer *buffer, int number, PyObject *text)
{
    if (!PyUnicode_CheckExact(text)) {
        return 1;
    }
    Py_ssize_t size;
    const char *hex = PyUnicode_AsUTF8AndSize(text, &size);
    if (hex == NULL) {
        PyErr_Clear();
        return 1;
    }
    if (size % 2 != 0 || size > 128) {
        return 1;
    }
    if (size == 0) {
        return 0;
    }
    char id[64];
    for (Py_ssize_t i = 0; i < size; i += 2) {
        int high = hex_digit((unsigned char)hex[i]);
        int low = hex_digit((unsigned char)hex[i + 1]);
        if (high < 0 || low < 0) {
            return 1;
        }
        id[i / 2] = (char)(high << 4 | low);
    }
    return write_length_delimited(buffer, number, id, size / 2);
}

/* SEVERITY_NUMBERS of _logs: the number of a severity_text, 0 for any other. */
static int
severity_number(PyObject *text)
{
    static const struct {
        const char *text;
        int number;
    } known[] = {{"INFO", 9}, {"WARN", 13}, {"ERROR", 17}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (PyUnicode_CompareWithASCIIString(text, known[i].text) == 0) {
            return known[i].number;
        }
    }
    return 0;
}

/* line.get(name) as a strong reference or NULL; -1 on error. */
static int
get(PyObject *line, const char *name, PyObject **found)
{
    PyObject *key = PyUnicode_FromString(name);
    if (key == NULL) {
        return -1;
    }
    int rc = PyDict_GetItemRef(line, key, found);
    Py_DECREF(key);
    return rc;
}

static int
write_log_record(Buffer *buffer, PyObject *line, unsigned long long time_ns,
                 unsigned long long observed_ns)
{
    PyObject *severity = NULL, *body = NULL, *attributes = NULL, *trace = NULL, *span = NULL;
    int rc = -1;
    if (get(line, "severity_text", &severity) < 0 || get(line, "body", &body) < 0
        || get(line, "attributes", &attributes) < 0 || get(line, "trace_id", &trace) < 0
        || get(line, "span_id", &span) < 0) {
        goto done;
    }
    rc = 1;
    if ((severity != NULL && !PyUnicode_CheckExact(severity))
        || (attributes != NULL && !PyDict_CheckExact(attributes))) {
        goto done;
    }
    rc = -1;
    /* Fields in their numbers' order: time (1), severity number (2) and text (3),
     * body (5), attributes (6), trace id (9), span id (10), observed time (11). */
    if (time_ns != 0 && write_fixed64(buffer, 1, time_ns) < 0) {
        goto done;
    }
    if (severity != NULL) {
        int number = severity_number(severity);
        if (number != 0 && (write_key(buffer, 2, VARINT) < 0 || write_varint(buffer, number) < 0)) {
            goto done;
        }
        if (write_text(buffer, 3, severity, 0) < 0) {
            goto done;
        }
    }
    rc = 0;
    if (body != NULL && body != Py_None) {
        Py_ssize_t start;
        rc = begin_message(buffer, 5, &start);
        if (rc == 0) {
            rc = write_any_value(buffer, body, 1);
        }
        if (rc == 0) {
            rc = end_message(buffer, start);
        }
    }
    if (rc == 0 && attributes != NULL) {
        rc = write_key_values(buffer, 6, attributes, 1);
    }
    if (rc == 0 && trace != NULL && trace != Py_None) {
        rc = write_id(buffer, 9, trace);
    }
    if (rc == 0 && span != NULL && span != Py_None) {
        rc = write_id(buffer, 10, span);
    }
    if (rc == 0 && observed_ns != 0) {
        rc = write_fixed64(buffer, 11, observed_ns);
    }
done:
    Py_XDECREF(severity);
    Py_XDECREF(body);
    Py_XDECREF(attributes);
    Py_XDECREF(trace);
    Py_XDECREF(span);
    return rc;
}

/* A fixed64 argument: 1 for an int that is not one (the reference's struct.error). */
static int
nanoseconds(PyObject *number, unsigned long long *value)
{
    if (!PyLong_CheckExact(number)) {
        return 1;
    }
    *value = PyLong_AsUnsignedLongLong(number);
    if (*value == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return -1;
        }
        PyErr_Clear();
        return 1;
    }
    return 0;
}

PyObject *
otlp_log_record(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "otlp_log_record takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyDict_CheckExact(args[0])) {
        Py_RETURN_NONE;
    }
    unsigned long long time_ns, observed_ns;
    int rc = nanoseconds(args[1], &time_ns);
    if (rc == 0) {
        rc = nanoseconds(args[2], &observed_ns);
    }
    if (rc != 0) {
        return rc < 0 ? NULL : Py_NewRef(Py_None);
    }
    Buffer buffer;
    if (buffer_init(&buffer, 512) < 0) {
        return NULL;
    }
    rc = write_log_record(&buffer, args[0], time_ns, observed_ns);
    return buffer_result(&buffer, rc);
}
