/* Packing a Record into one block of bytes, and back (see packed.h). */
#include "record/packed.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buffer.h"
#include "common/compat.h"
#include "common/text.h"
#include "record/extras.h"
#include "record/record.h"

/* What packable() finds of a record of the packed shape: its texts, and its numbers
 * and flags as the Packed holds them. */
typedef struct {
    TextBytes texts[PACKED_TEXTS];
    unsigned int flags;
    long long status, sent;
    PyTypeObject *extras_type; /* borrowed from the record's extras */
    unsigned long long trace_high, trace_low, span_id;
    long long bytes_received, close_code;
    PyObject *notes;           /* borrowed from the record; NULL for None */
    Py_ssize_t notes_cost;     /* what they cost the record's budget */
} Texts;

static void
texts_release(Texts *texts, int count)
{
    for (int i = 0; i < count; i++) {
        text_release(&texts->texts[i]);
    }
}

/* A str as packed: its UTF-8 with surrogatepass (text_utf8), which the formats
 * escape as they escape the str itself.  1, 0 for no exact str, -1 on error. */
static int
packed_str(PyObject *value, TextBytes *text)
{
    if (!PyUnicode_CheckExact(value)) {
        return 0;
    }
    return text_utf8(value, text) < 0 ? -1 : 1;
}

/* An extras field that is None or an exact int of 64 bits: 1, with `flag` added to
 * *flags and the number in *number when it is an int; 0 for anything else. */
static int
pack_count(PyObject *value, unsigned int flag, unsigned int *flags, long long *number)
{
    if (value == Py_None) {
        return 1;
    }
    if (record_integer(value, number) != 0) {
        return 0;
    }
    *flags |= flag;
    return 1;
}

/* Whether the record's extras pack (None, or a tuple of EXTRAS_FIELDS fields: the
 * route None or a str, the trace None or what extras_trace_numbers reads, completed None or a
 * bool, the counts None or ints of 64 bits, the environ None): 1 with their flags,
 * numbers and route text in *texts, 0 if not (no exception), -1 on error.  The fields
 * of extras of class `type`, then the extras (`learnt`, or the object `extras`). */
static int
pack_extra_fields(PyTypeObject *type, PyObject *const *field, Texts *texts)
{
    PyObject *completed = field[EXTRAS_COMPLETED];
    if (field[EXTRAS_ENVIRON] != Py_None
        || (completed != Py_None && completed != Py_True && completed != Py_False)
        || !pack_count(field[EXTRAS_BYTES_RECEIVED], PACKED_BYTES_RECEIVED, &texts->flags,
                       &texts->bytes_received)
        || !pack_count(field[EXTRAS_CLOSE_CODE], PACKED_CLOSE_CODE, &texts->flags,
                       &texts->close_code)
        || (field[EXTRAS_ROUTE] != Py_None && !PyUnicode_CheckExact(field[EXTRAS_ROUTE]))) {
        return 0;
    }
    if (field[EXTRAS_TRACE] != Py_None) {
        if (!extras_trace_numbers(field[EXTRAS_TRACE], &texts->trace_high, &texts->trace_low,
                                  &texts->span_id)) {
            return 0;
        }
        texts->flags |= PACKED_TRACE;
    }
    if (completed != Py_None) {
        texts->flags |= PACKED_COMPLETED | (completed == Py_True ? PACKED_COMPLETED_TRUE : 0);
    }
    if (field[EXTRAS_ROUTE] != Py_None) {
        if (text_utf8(field[EXTRAS_ROUTE], &texts->texts[PACKED_ROUTE]) < 0) {
            return -1;
        }
        texts->flags |= PACKED_ROUTE_STR;
    }
    texts->extras_type = type;
    return 1;
}

static int
pack_extras(PyObject *extras, const ExtrasFields *learnt, Texts *texts)
{
    texts->extras_type = NULL;
    texts->texts[PACKED_ROUTE] = (TextBytes){"", 0, NULL};
    if (learnt != NULL) {
        return pack_extra_fields(learnt->type, learnt->fields, texts);
    }
    if (extras == Py_None) {
        return 1;
    }
    if (!PyTuple_Check(extras) || PyTuple_GET_SIZE(extras) != EXTRAS_FIELDS) {
        return 0;
    }
    return pack_extra_fields(Py_TYPE(extras), &PyTuple_GET_ITEM(extras, 0), texts);
}

/* Whether the record's notes pack: None, or an exact dict of exact str keys and
 * values of the exact JSON scalar types (None, bool, int, float, str), kept as the
 * dict itself: no such dict can be in a cycle (CPython with the GIL does not even
 * track it, RecordBudget.notes's copy included), so a Packed, which the collector
 * does not see, may hold it; and the formats read it as they read a Record's notes.  1 with the notes and their cost (_budget.record_cost's) in
 * *texts, else 0. */
static int
pack_notes(PyObject *notes, Texts *texts)
{
    texts->notes = NULL;
    texts->notes_cost = 0;
    if (notes == Py_None) {
        return 1;
    }
    if (!PyDict_CheckExact(notes)) {
        return 0;
    }
    int ok = 1;
    Py_ssize_t cost = 0;
    /* A record built by hand may share its dict with another thread. */
    Py_BEGIN_CRITICAL_SECTION(notes);
    Py_ssize_t position = 0;
    PyObject *key, *value;
    while (ok && PyDict_Next(notes, &position, &key, &value)) {
        ok = PyUnicode_CheckExact(key)
             && (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value)
                 || PyFloat_CheckExact(value) || PyUnicode_CheckExact(value));
        if (ok) {
            cost += FIELD_OVERHEAD + PyUnicode_GET_LENGTH(key)
                    + (PyUnicode_CheckExact(value) ? PyUnicode_GET_LENGTH(value) : 0);
        }
    }
    Py_END_CRITICAL_SECTION();
    if (ok) {
        texts->notes = notes;
        texts->notes_cost = cost;
    }
    return ok;
}

/* Whether a record of `fields` (indexed as a Record's: TIME and DURATION are not
 * read) has the shape packed: 1 with its texts and numbers in *texts (its texts
 * released by the caller), 0 if not, -1 on error.  The shape: client None or a str;
 * method and protocol str; path and query bytes; status and bytes sent ints of 64
 * bits; request headers a list or tuple of (bytes, bytes) pairs (ASGI) or of (str,
 * str) pairs (gunicorn's: ASCII names, values of one byte a character), or a dict of
 * the environ's picked fields, ASCII str keys to str values of one byte a character
 * (WSGI), which packed_from_fields checks as it copies them; no response headers (an
 * empty tuple); notes None or of the shape pack_notes packs; extras None or of the
 * shape pack_extras packs.  Exact types
 * only, so that unpacking gives back what was packed and the formats read it as they
 * read the record. */
static int
packable(PyObject *const *fields, const ExtrasFields *learnt, const long long *sent,
         Texts *texts)
{
    PyObject *client = fields[CLIENT];
    PyObject *headers = fields[REQUEST_HEADERS];
    PyObject *response = fields[RESPONSE_HEADERS];
    texts->flags = 0;
    if (!PyBytes_CheckExact(fields[PATH]) || !PyBytes_CheckExact(fields[QUERY])
        || !PyTuple_CheckExact(response) || PyTuple_GET_SIZE(response) != 0
        || !pack_notes(fields[NOTES], texts)
        || (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers)
            && !PyDict_CheckExact(headers))
        || record_integer(fields[STATUS], &texts->status) != 0) {
        return 0;
    }
    if (sent != NULL) {
        texts->sent = *sent;
    }
    else if (record_integer(fields[BYTES_SENT], &texts->sent) != 0) {
        return 0;
    }
    texts->flags = PyTuple_CheckExact(headers)  ? PACKED_HEADER_TUPLE
                   : PyDict_CheckExact(headers) ? PACKED_HEADER_ENVIRON
                                                : 0;
    int rc = pack_extras(fields[EXTRAS], learnt, texts);
    if (rc <= 0) {
        return rc;
    }
    text_of_bytes(fields[PATH], &texts->texts[PACKED_PATH]);
    text_of_bytes(fields[QUERY], &texts->texts[PACKED_QUERY]);
    if (client == Py_None) {
        texts->flags |= PACKED_NO_CLIENT;
        texts->texts[PACKED_CLIENT] = (TextBytes){"", 0, NULL};
        rc = 1;
    }
    else {
        rc = packed_str(client, &texts->texts[PACKED_CLIENT]);
    }
    if (rc == 1) {
        rc = packed_str(fields[METHOD], &texts->texts[PACKED_METHOD]);
        if (rc == 1) {
            rc = packed_str(fields[PROTOCOL], &texts->texts[PACKED_PROTOCOL]);
            if (rc != 1) {
                text_release(&texts->texts[PACKED_METHOD]);
            }
        }
        if (rc != 1) {
            text_release(&texts->texts[PACKED_CLIENT]);
        }
    }
    if (rc != 1) {
        text_release(&texts->texts[PACKED_ROUTE]);
    }
    return rc;
}

/* A header field's name and value as packed: bytes as they are (FIELD_BYTES); a str
 * name (ASCII) and a str value of one byte a character, which are those bytes
 * (latin-1, as the formats write such a value: text.h) (FIELD_STR).  0 for anything
 * else, a mix of the two included. */
enum { FIELD_BYTES = 1, FIELD_STR = 2 };

static int
field_bytes(PyObject *name, PyObject *value, const char **name_data, Py_ssize_t *name_size,
            const char **value_data, Py_ssize_t *value_size)
{
    if (PyBytes_CheckExact(name) && PyBytes_CheckExact(value)) {
        *name_data = PyBytes_AS_STRING(name);
        *name_size = PyBytes_GET_SIZE(name);
        *value_data = PyBytes_AS_STRING(value);
        *value_size = PyBytes_GET_SIZE(value);
        return FIELD_BYTES;
    }
    if (PyUnicode_CheckExact(name) && PyUnicode_IS_ASCII(name) && PyUnicode_CheckExact(value)
        && PyUnicode_KIND(value) == PyUnicode_1BYTE_KIND) {
        *name_data = (const char *)PyUnicode_DATA(name);
        *name_size = PyUnicode_GET_LENGTH(name);
        *value_data = (const char *)PyUnicode_DATA(value);
        *value_size = PyUnicode_GET_LENGTH(value);
        return FIELD_STR;
    }
    return 0;
}

/* The bit of keeps->lengths for a name of `size` bytes. */
static inline uint64_t
length_bit(Py_ssize_t size)
{
    return (uint64_t)1 << (size < 63 ? size : 63);
}

int
packed_keeps(PyObject *names, PackedKeeps *keeps)
{
    keeps->names = NULL;
    keeps->lengths = 0;
    if (names == Py_None) {
        return 0;
    }
    PyObject *tuple = PySequence_Tuple(names);
    if (tuple == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *name = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_CheckExact(name)) {
            PyErr_Format(PyExc_TypeError, "keeps: header field names are bytes, not %.100s",
                         Py_TYPE(name)->tp_name);
            Py_DECREF(tuple);
            return -1;
        }
        const char *data = PyBytes_AS_STRING(name);
        for (Py_ssize_t j = 0; j < PyBytes_GET_SIZE(name); j++) {
            if (data[j] >= 'A' && data[j] <= 'Z') {
                PyErr_Format(PyExc_ValueError, "keeps: header field names are lower-case, "
                             "not %R", name);
                Py_DECREF(tuple);
                return -1;
            }
        }
        keeps->lengths |= length_bit(PyBytes_GET_SIZE(name));
    }
    keeps->names = tuple;
    return 0;
}

/* Whether a pair's field named `name` is one `keeps` names (packed_from_fields). */
static int
keeps_field(const PackedKeeps *keeps, const char *name, Py_ssize_t size)
{
    if (keeps == NULL || keeps->names == NULL) {
        return 1;
    }
    if (!(keeps->lengths & length_bit(size))) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keeps->names); i++) {
        PyObject *kept = PyTuple_GET_ITEM(keeps->names, i);
        if (text_is_name(name, size, PyBytes_AS_STRING(kept), PyBytes_GET_SIZE(kept))) {
            return 1;
        }
    }
    return 0;
}

/* What the header fields are measured, visiting them. */
typedef struct {
    Py_ssize_t size;     /* the bytes the kept fields take in data[] */
    Py_ssize_t kept;     /* how many are kept */
    Py_ssize_t estimate; /* every field by _budget._headers_size's estimate */
    uint64_t dropped;    /* bit i: the i-th field is not kept (the first 64; the copy
                          * asks keeps_field again for the others) */
} HeaderSizes;

/* Visits each header field of `headers` (pairs, or a dict when `environ`): 1, or 0 as
 * soon as one has another shape (or is past 4 GiB).  Every field must be of one kind
 * (field_bytes), which is left in *kind (FIELD_STR for an environ's; unchanged for no
 * pairs): unpacking makes them all of it.  With `out`, copies each field `keeps` names
 * (its two sizes, uint32_t, then its bytes) and advances *out; else measures them all
 * into *sizes.  Called inside a critical section on `headers`. */
static int
visit_headers(PyObject *headers, int environ, const PackedKeeps *keeps, int *kind, char **out,
              HeaderSizes *sizes)
{
    Py_ssize_t position = 0, i = 0;
    PyObject *name, *value;
    Py_ssize_t count = environ ? 0 : PySequence_Fast_GET_SIZE(headers);
    for (;;) {
        if (environ) {
            if (!PyDict_Next(headers, &position, &name, &value)) {
                return 1;
            }
        }
        else {
            if (i == count) {
                return 1;
            }
            Py_ssize_t index = i++;
            if (out != NULL && index < 64 && (sizes->dropped >> index & 1)) {
                continue; /* measured already, and not kept */
            }
            PyObject *pair = PySequence_Fast_ITEMS(headers)[index];
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
                return 0;
            }
            name = PyTuple_GET_ITEM(pair, 0);
            value = PyTuple_GET_ITEM(pair, 1);
        }
        const char *name_data, *value_data;
        Py_ssize_t name_size, value_size;
        int field = field_bytes(name, value, &name_data, &name_size, &value_data, &value_size);
        if (field == 0 || (*kind != 0 && field != *kind) || (size_t)name_size > UINT32_MAX
            || (size_t)value_size > UINT32_MAX) {
            return 0;
        }
        *kind = field;
        if (out == NULL) {
            /* An environ's field costs its value's characters, a pair its two. */
            sizes->estimate += FIELD_OVERHEAD + value_size + (environ ? 0 : name_size);
            if (environ || keeps_field(keeps, name_data, name_size)) {
                sizes->size += 2 * (Py_ssize_t)sizeof(uint32_t) + name_size + value_size;
                sizes->kept += 1;
            }
            else if (i <= 64) {
                sizes->dropped |= (uint64_t)1 << (i - 1);
            }
            continue;
        }
        if (!environ && i > 64 && !keeps_field(keeps, name_data, name_size)) {
            continue;
        }
        uint32_t field_sizes[2] = {(uint32_t)name_size, (uint32_t)value_size};
        memcpy(*out, field_sizes, sizeof(field_sizes));
        *out += sizeof(field_sizes);
        buffer_copy(*out, name_data, (size_t)name_size);
        *out += name_size;
        buffer_copy(*out, value_data, (size_t)value_size);
        *out += value_size;
    }
}

PyObject *
packed_from_fields(PyTypeObject *type, PyTypeObject *record_type, double time, double duration,
                   PyObject *const *fields, const ExtrasFields *learnt, const long long *sent,
                   const PackedKeeps *keeps)
{
    Texts texts;
    memset(&texts, 0, sizeof(texts));
    int rc = packable(fields, learnt, sent, &texts);
    if (rc <= 0) {
        return NULL;
    }
    Py_ssize_t size = 0;
    for (int i = 0; i < PACKED_TEXTS; i++) {
        size += texts.texts[i].size;
    }
    PyObject *headers = fields[REQUEST_HEADERS];
    Packed *packed = NULL;
    /* A list the server made may be changed by another thread without the GIL: it is
     * measured and copied in one critical section. */
    Py_BEGIN_CRITICAL_SECTION(headers);
    int environ = (texts.flags & PACKED_HEADER_ENVIRON) != 0;
    int kind = environ ? FIELD_STR : 0;
    HeaderSizes sizes = {0, 0, 0, 0};
    if (visit_headers(headers, environ, keeps, &kind, NULL, &sizes)) {
        size += sizes.size;
        /* Not tp_alloc, which zeroes what is written over at once below. */
        packed = PyObject_Malloc(offsetof(Packed, data) + (size_t)size);
        if (packed == NULL) {
            PyErr_NoMemory();
        }
    }
    if (packed != NULL) {
        PyObject_InitVar((PyVarObject *)packed, type, size); /* holds the (heap) type */
        char *out = packed->data;
        for (int i = 0; i < PACKED_TEXTS; i++) {
            /* Mostly a few bytes: copied inline (buffer.h). */
            buffer_copy(out, texts.texts[i].data, (size_t)texts.texts[i].size);
            out += texts.texts[i].size;
            packed->ends[i] = out - packed->data;
        }
        visit_headers(headers, environ, keeps, &kind, &out, &sizes);
        if (kind == FIELD_STR && !environ) {
            texts.flags |= PACKED_HEADER_STR;
        }
        packed->header_count = sizes.kept;
        Py_ssize_t path_and_query = texts.texts[PACKED_PATH].size + texts.texts[PACKED_QUERY].size;
        /* What it holds of the client's bytes, byte for byte (packed.h). */
        packed->cost = path_and_query + sizes.size + texts.notes_cost;
        packed->estimate = path_and_query + sizes.estimate;
    }
    Py_END_CRITICAL_SECTION();
    texts_release(&texts, PACKED_TEXTS);
    if (packed == NULL) {
        return NULL; /* another shape (no exception), or no memory */
    }
    packed->record_type = (PyTypeObject *)Py_NewRef(record_type);
    packed->time = time;
    packed->duration = duration;
    packed->status = texts.status;
    packed->sent = texts.sent;
    packed->flags = texts.flags;
    packed->extras_type = (PyTypeObject *)Py_XNewRef(texts.extras_type);
    packed->trace_high = texts.trace_high;
    packed->trace_low = texts.trace_low;
    packed->span_id = texts.span_id;
    packed->bytes_received = texts.bytes_received;
    packed->close_code = texts.close_code;
    packed->notes = Py_XNewRef(texts.notes);
    return (PyObject *)packed;
}

PyObject *
packed_with_notes(Packed *packed, PyObject *notes)
{
    Texts texts;
    if (packed->notes != NULL || !pack_notes(notes, &texts)) {
        return NULL;
    }
    Py_ssize_t size = Py_SIZE(packed);
    Packed *noted = PyObject_Malloc(offsetof(Packed, data) + (size_t)size);
    if (noted == NULL) {
        return PyErr_NoMemory();
    }
    /* Everything as it is, then the object's own header and references. */
    memcpy(noted, packed, offsetof(Packed, data) + (size_t)size);
    PyObject_InitVar((PyVarObject *)noted, Py_TYPE(packed), size); /* holds the type */
    Py_INCREF(noted->record_type);
    Py_XINCREF(noted->extras_type);
    noted->notes = Py_NewRef(notes);
    noted->cost = packed->cost + texts.notes_cost;
    return (PyObject *)noted;
}

PyObject *
packed_from_record(PyTypeObject *type, PyObject *record, const PackedKeeps *keeps)
{
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != FIELDS
        || !PyFloat_CheckExact(PyTuple_GET_ITEM(record, TIME))
        || !PyFloat_CheckExact(PyTuple_GET_ITEM(record, DURATION))) {
        return NULL;
    }
    return packed_from_fields(type, Py_TYPE(record),
                              PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(record, TIME)),
                              PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(record, DURATION)),
                              &PyTuple_GET_ITEM(record, 0), NULL, NULL, keeps);
}

static PyObject *
unpacked_str(Packed *packed, int which)
{
    Py_ssize_t size;
    const char *data = packed_text(packed, which, &size);
    return PyUnicode_DecodeUTF8(data, size, "surrogatepass");
}

static PyObject *
unpacked_bytes(Packed *packed, int which)
{
    Py_ssize_t size;
    const char *data = packed_text(packed, which, &size);
    return PyBytes_FromStringAndSize(data, size);
}

/* The request header fields as the record held them: a list or tuple of (bytes,
 * bytes) or (str, str) pairs, or the picked environ fields of a WSGI record as a dict
 * of str. */
static PyObject *
unpacked_headers(Packed *packed)
{
    int environ = (packed->flags & PACKED_HEADER_ENVIRON) != 0;
    int tuple = (packed->flags & PACKED_HEADER_TUPLE) != 0;
    int str = environ || (packed->flags & PACKED_HEADER_STR) != 0;
    PyObject *headers = environ ? PyDict_New()
                        : tuple ? PyTuple_New(packed->header_count)
                                : PyList_New(packed->header_count);
    if (headers == NULL) {
        return NULL;
    }
    PackedFields fields;
    packed_fields(packed, &fields);
    const char *name, *value;
    Py_ssize_t name_size, value_size;
    for (Py_ssize_t i = 0; packed_next_field(&fields, &name, &name_size, &value, &value_size); i++) {
        PyObject *key = str ? PyUnicode_DecodeASCII(name, name_size, NULL)
                            : PyBytes_FromStringAndSize(name, name_size);
        PyObject *text = key == NULL ? NULL
                         : str       ? PyUnicode_DecodeLatin1(value, value_size, NULL)
                                     : PyBytes_FromStringAndSize(value, value_size);
        PyObject *pair = environ || text == NULL ? NULL : PyTuple_Pack(2, key, text);
        int rc = text == NULL ? -1
                 : environ    ? PyDict_SetItem(headers, key, text)
                 : pair == NULL ? -1
                                : 0;
        if (pair != NULL) {
            if (tuple) {
                PyTuple_SET_ITEM(headers, i, pair); /* stolen */
            }
            else {
                PyList_SET_ITEM(headers, i, pair);
            }
        }
        Py_XDECREF(key);
        Py_XDECREF(text);
        if (rc < 0) {
            Py_DECREF(headers);
            return NULL;
        }
    }
    return headers;
}

/* A new int of (high << 64) | low. */
static PyObject *
unpacked_int128(unsigned long long high, unsigned long long low)
{
    if (high == 0) {
        return PyLong_FromUnsignedLongLong(low);
    }
    PyObject *upper = PyLong_FromUnsignedLongLong(high);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *lower = PyLong_FromUnsignedLongLong(low);
    PyObject *shifted = upper == NULL || shift == NULL ? NULL : PyNumber_Lshift(upper, shift);
    PyObject *number = shifted == NULL || lower == NULL ? NULL : PyNumber_Or(shifted, lower);
    Py_XDECREF(upper);
    Py_XDECREF(shift);
    Py_XDECREF(lower);
    Py_XDECREF(shifted);
    return number;
}

/* A packed extras field as the object it was: a new reference, NULL on error. */
static PyObject *
unpacked_extra(Packed *packed, int index)
{
    PackedValue value;
    packed_extra(packed, index, &value);
    switch (value.kind) {
    case PACKED_VALUE_FALSE:
        Py_RETURN_FALSE;
    case PACKED_VALUE_TRUE:
        Py_RETURN_TRUE;
    case PACKED_VALUE_INT:
        return PyLong_FromLongLong(value.number);
    case PACKED_VALUE_TEXT:
        return PyUnicode_DecodeUTF8(value.text, value.size, "surrogatepass");
    case PACKED_VALUE_OTHER: { /* the trace */
        PyObject *trace_id = unpacked_int128(packed->trace_high, packed->trace_low);
        PyObject *span_id = PyLong_FromUnsignedLongLong(packed->span_id);
        PyObject *trace = trace_id == NULL || span_id == NULL ? NULL
                                                              : PyTuple_Pack(2, trace_id, span_id);
        Py_XDECREF(trace_id);
        Py_XDECREF(span_id);
        return trace;
    }
    default:
        Py_RETURN_NONE;
    }
}

/* The record's extras as they were: None, or a new tuple of their class. */
static PyObject *
unpacked_extras(Packed *packed)
{
    PyTypeObject *type = packed->extras_type;
    if (type == NULL) {
        Py_RETURN_NONE;
    }
    PyObject *extras = type->tp_alloc(type, EXTRAS_FIELDS);
    if (extras == NULL) {
        return NULL;
    }
    for (int i = 0; i < EXTRAS_FIELDS; i++) {
        PyObject *field = unpacked_extra(packed, i);
        if (field == NULL) {
            Py_DECREF(extras);
            return NULL;
        }
        PyTuple_SET_ITEM(extras, i, field); /* stolen */
    }
    return extras;
}

void
packed_extra(Packed *packed, int index, PackedValue *value)
{
    unsigned int flags = packed->flags;
    value->kind = PACKED_VALUE_NONE;
    switch (index) {
    case EXTRAS_ROUTE:
        if (flags & PACKED_ROUTE_STR) {
            value->kind = PACKED_VALUE_TEXT;
            value->text = packed_text(packed, PACKED_ROUTE, &value->size);
        }
        break;
    case EXTRAS_TRACE:
        if (flags & PACKED_TRACE) {
            value->kind = PACKED_VALUE_OTHER;
        }
        break;
    case EXTRAS_COMPLETED:
        if (flags & PACKED_COMPLETED) {
            value->kind = flags & PACKED_COMPLETED_TRUE ? PACKED_VALUE_TRUE : PACKED_VALUE_FALSE;
        }
        break;
    case EXTRAS_BYTES_RECEIVED:
        if (flags & PACKED_BYTES_RECEIVED) {
            value->kind = PACKED_VALUE_INT;
            value->number = packed->bytes_received;
        }
        break;
    case EXTRAS_CLOSE_CODE:
        if (flags & PACKED_CLOSE_CODE) {
            value->kind = PACKED_VALUE_INT;
            value->number = packed->close_code;
        }
        break;
    default: /* the environ: always None */
        break;
    }
}

PyObject *
packed_record(PyObject *self)
{
    Packed *packed = (Packed *)self;
    PyObject *fields[FIELDS] = {NULL};
    fields[TIME] = PyFloat_FromDouble(packed->time);
    fields[DURATION] = PyFloat_FromDouble(packed->duration);
    fields[CLIENT] = packed->flags & PACKED_NO_CLIENT ? Py_NewRef(Py_None)
                                                      : unpacked_str(packed, PACKED_CLIENT);
    fields[METHOD] = unpacked_str(packed, PACKED_METHOD);
    fields[PATH] = unpacked_bytes(packed, PACKED_PATH);
    fields[QUERY] = unpacked_bytes(packed, PACKED_QUERY);
    fields[PROTOCOL] = unpacked_str(packed, PACKED_PROTOCOL);
    fields[STATUS] = PyLong_FromLongLong(packed->status);
    fields[BYTES_SENT] = PyLong_FromLongLong(packed->sent);
    fields[REQUEST_HEADERS] = unpacked_headers(packed);
    fields[RESPONSE_HEADERS] = PyTuple_New(0);
    fields[NOTES] = Py_NewRef(packed_notes(packed));
    fields[EXTRAS] = unpacked_extras(packed);
    PyObject *record = NULL;
    int complete = 1;
    for (int i = 0; i < FIELDS; i++) {
        complete = complete && fields[i] != NULL;
    }
    if (complete) {
        /* tuple.__new__(Record, fields), as the request paths make records. */
        record = packed->record_type->tp_alloc(packed->record_type, FIELDS);
    }
    if (record == NULL) {
        for (int i = 0; i < FIELDS; i++) {
            Py_XDECREF(fields[i]);
        }
        return NULL;
    }
    for (int i = 0; i < FIELDS; i++) {
        PyTuple_SET_ITEM(record, i, fields[i]); /* stolen */
    }
    return record;
}

PyObject *
packed_unpacked(PyObject *records)
{
    PyObject *list = PySequence_List(records);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (packed_check(item)) {
            PyObject *record = packed_record(item);
            if (record == NULL) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SetItem(list, i, record); /* the list is ours alone */
        }
    }
    return list;
}

void
packed_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    Py_XDECREF(((Packed *)self)->record_type);
    Py_XDECREF(((Packed *)self)->extras_type);
    Py_XDECREF(((Packed *)self)->notes);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *
packed_get_record(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return packed_record(self);
}

static PyMethodDef packed_methods[] = {
    {"record", packed_get_record, METH_NOARGS, "record() -> Record: the record packed."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef packed_members[] = {
    {"cost", Py_T_PYSSIZET, offsetof(Packed, cost), Py_READONLY,
     "What the queue's byte budget charges the record: the bytes it holds of its path,\n"
     "query and header fields (each with two 4-byte sizes), and its notes as\n"
     "_budget.record_cost counts them."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot packed_slots[] = {
    {Py_tp_doc, "A Record packed into one block of bytes while it is queued (made by the\n"
                "C hand-off; record() gives the Record back)."},
    {Py_tp_dealloc, packed_dealloc},
    {Py_tp_methods, packed_methods},
    {Py_tp_members, packed_members},
    {0, NULL},
};

PyType_Spec packed_spec = {
    .name = "boundlog._speedups.Packed",
    .basicsize = (int)offsetof(Packed, data),
    .itemsize = 1,
    /* Not a GC type (nothing it holds can be in a cycle: bytes, numbers and the
     * record's class), and not a base: packed_check relies on the exact type. */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = packed_slots,
};
