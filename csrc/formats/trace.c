/* Trace context, as _trace.trace_ids reads it: the span's ids, else the W3C
 * traceparent header's.  Both give lower-case hex, 32 and 16 digits. */
#include "formats/trace.h"

#include <string.h>

#include "formats/headers.h"
#include "record/extras.h"

static const char HEX[] = "0123456789abcdef";

/* Writes the 16 hex digits of `number` into `out`. */
static void
write_hex(unsigned long long number, char *out)
{
    for (int i = 15; i >= 0; i--) {
        out[i] = HEX[number & 0xf];
        number >>= 4;
    }
}

int
trace_ids_from_span(PyObject *trace, TraceIds *ids)
{
    unsigned long long high, low, span;
    return extras_trace_numbers(trace, &high, &low, &span)
           && trace_ids_from_numbers(high, low, span, ids);
}

int
trace_ids_from_numbers(unsigned long long high, unsigned long long low, unsigned long long span,
                       TraceIds *ids)
{
    if ((high == 0 && low == 0) || span == 0) {
        return 0;
    }
    write_hex(high, ids->trace_id);
    write_hex(low, ids->trace_id + 16);
    write_hex(span, ids->span_id);
    return 1;
}

int
trace_ids_from_packed(Packed *packed, TraceIds *ids)
{
    return (packed->flags & PACKED_TRACE) != 0
           && trace_ids_from_numbers(packed->trace_high, packed->trace_low, packed->span_id, ids);
}

static int
is_lower_hex(const char *text, Py_ssize_t size)
{
    for (Py_ssize_t i = 0; i < size; i++) {
        if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

static int
all_zeros(const char *text, Py_ssize_t size)
{
    for (Py_ssize_t i = 0; i < size; i++) {
        if (text[i] != '0') {
            return 0;
        }
    }
    return 1;
}

/* version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2. */
#define TRACEPARENT_SIZE 55

int
trace_ids_from_header(const char *value, Py_ssize_t size, TraceIds *ids)
{
    if (size < TRACEPARENT_SIZE || value[2] != '-' || value[35] != '-' || value[52] != '-'
        || !is_lower_hex(value, 2) || !is_lower_hex(value + 3, 32)
        || !is_lower_hex(value + 36, 16) || !is_lower_hex(value + 53, 2)) {
        return 0;
    }
    if (memcmp(value, "ff", 2) == 0) {
        return 0;
    }
    /* Version 00 has nothing after the flags; a later one may have "-" and more. */
    if (size > TRACEPARENT_SIZE
        && (memcmp(value, "00", 2) == 0 || value[TRACEPARENT_SIZE] != '-')) {
        return 0;
    }
    if (all_zeros(value + 3, 32) || all_zeros(value + 36, 16)) {
        return 0;
    }
    memcpy(ids->trace_id, value + 3, 32);
    memcpy(ids->span_id, value + 36, 16);
    return 1;
}

int
trace_ids_from_headers(Buffer *scratch, PyObject *headers, PyObject *name,
                       PyObject *environ_key, TraceIds *ids, int *found)
{
    *found = 0;
    scratch->length = 0;
    int rc = headers_find(scratch, headers, name, environ_key, buffer_write);
    if (rc == HEADERS_ABSENT) {
        return 0;
    }
    if (rc == 0) {
        *found = trace_ids_from_header(scratch->data, scratch->length, ids);
    }
    return rc;
}
