/* Trace context: the trace and span ids a line shows (_trace.trace_ids). */
#ifndef BOUNDLOG_TRACE_H
#define BOUNDLOG_TRACE_H

#include "common/buffer.h"
#include "record/packed.h"

/* Lower-case hex digits of a trace id and a span id. */
typedef struct {
    char trace_id[32];
    char span_id[16];
} TraceIds;

/* The ids of a record's extras.trace, when it is an exact tuple of two exact ints in
 * range (not 0, below 2**128 and 2**64): 1 with *ids set, else 0.  No exception. */
int trace_ids_from_span(PyObject *trace, TraceIds *ids);

/* The ids of a trace id (its high and low 64 bits) and a span id, when neither is 0:
 * 1 with *ids set, else 0. */
int trace_ids_from_numbers(unsigned long long high, unsigned long long low, unsigned long long span,
                           TraceIds *ids);

/* trace_ids_from_span for a Packed record's extras (a trace packs only as two ints in
 * range). */
int trace_ids_from_packed(Packed *packed, TraceIds *ids);

/* The ids of a traceparent header's value, by the rule of _trace's docstring: 1 with
 * *ids set, else 0. */
int trace_ids_from_header(const char *value, Py_ssize_t size, TraceIds *ids);

/* The ids of the traceparent field in a record's request `headers`, found by its
 * lower-case `name` and WSGI `environ_key` (headers.h) and gathered in `scratch`: 0
 * with *found 1 and *ids set, or *found 0 when the field is absent or gives none; -1
 * with an exception set, or HEADERS_UNSUPPORTED for headers headers_find leaves. */
int trace_ids_from_headers(Buffer *scratch, PyObject *headers, PyObject *name,
                           PyObject *environ_key, TraceIds *ids, int *found);

#endif
