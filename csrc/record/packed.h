/* A Record packed into one block of bytes while it waits in the queue: Packed.
 *
 * Why: a queued Record keeps Python objects alive for the writer's window (its tuple,
 * and the server's header list and pairs it refers to).  They are allocated on the
 * request path, counted by the garbage collector until the writer frees them, and
 * walked by every collection meanwhile: behind uvicorn that made the collector run a
 * hundred times as often, and the writer spend a fifth of its time freeing.  A Packed
 * is one allocation the collector does not count (not a GC type), holding the bytes
 * of the fields a line reads; the Record it came from is freed on the request path,
 * where its memory is warm and reused at once.
 *
 * Only records of the shape the request paths make are packed (packed_from_record
 * says which); the C hand-off packs them for a log whose writer formats them in C
 * (the common and combined lines, templates, JSON and logfmt).  Anything else that
 * needs the Record gets it back with packed_record(), equal to the one packed in all
 * but the header fields it did not keep (below): the pure-Python fallback of a batch
 * (_core.CompiledFirst), and the tests that prove the lines equal.
 *
 * What a Packed costs the queue's byte budget (max_queue_bytes) is what it holds of
 * the client's bytes: its path, query and kept header fields byte for byte, each with
 * its two sizes (8 bytes), and its notes as _budget.record_cost counts them (a dict
 * of Python objects).  Not record_cost's 160 bytes a header field
 * (_budget.FIELD_OVERHEAD: the pair and two bytes objects of a Record's list), which
 * a Packed does not keep: by that estimate a browser's ordinary request (a dozen
 * fields) was over its share of the budget (1 KiB by default) and took the
 * Admission's locked slow path on the request path and again on the writer's, for
 * memory it does not use.  What a record keeps of an oversized request
 * (max_record_bytes) is still decided by the estimate, before packing, as the
 * reference decides it.
 *
 * Of the request's header fields a Packed holds only those the log's lines read
 * (`keeps`, the log's request_header_names, when it knows them): a line looks a field
 * up by name, and repeats are joined in order, so the line of the Record given back
 * (which holds those fields alone) is the line of the Record packed; the fields are
 * still measured, all of them, for the room of the application's fields.  A browser
 * sends a dozen fields and the combined line reads two: copying the others, and
 * searching past them for each field a line shows, was most of what a record cost. */
#ifndef BOUNDLOG_PACKED_H
#define BOUNDLOG_PACKED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The texts a Packed holds, in order in its data[]; a str is kept as its UTF-8 with
 * surrogatepass, which the formats escape as they escape the str (text.h).  The
 * route is its extras' (empty when it has none: see the flags). */
enum { PACKED_CLIENT, PACKED_METHOD, PACKED_PATH, PACKED_QUERY, PACKED_PROTOCOL, PACKED_ROUTE,
       PACKED_TEXTS };

/* flags */
#define PACKED_NO_CLIENT 1u       /* the client address was None */
#define PACKED_HEADER_TUPLE 2u    /* the request headers were a tuple, not a list */
#define PACKED_HEADER_ENVIRON 4u  /* the request headers were a dict of environ keys to str */
#define PACKED_HEADER_STR 8u      /* the request headers were pairs of str (gunicorn's) */
/* Which fields of the record's extras (extras.h) were not None; the environ always
 * was (a record whose extras hold one is not packed). */
#define PACKED_ROUTE_STR 16u      /* the route, a str: the text PACKED_ROUTE */
#define PACKED_TRACE 32u          /* the trace: (trace_id, span_id), ints */
#define PACKED_COMPLETED 64u      /* completed: a bool, PACKED_COMPLETED_TRUE or not */
#define PACKED_COMPLETED_TRUE 128u
#define PACKED_BYTES_RECEIVED 256u /* bytes_received: an int */
#define PACKED_CLOSE_CODE 512u    /* close_code: an int */

typedef struct {
    PyObject_VAR_HEAD          /* ob_size: the bytes in data[] */
    PyTypeObject *record_type; /* the Record's own class, a strong reference */
    double time;
    double duration;
    long long status;
    long long sent;
    Py_ssize_t cost;           /* what the queue's byte budget charges it (above) */
    Py_ssize_t estimate;       /* its path, query and every header field the request
                                * had, by _budget's estimate (_used before its limit):
                                * what the room of the application's fields is
                                * measured from (budget_packed_used) */
    Py_ssize_t header_count;
    Py_ssize_t ends[PACKED_TEXTS]; /* where each text ends in data[]; the last, where the
                                    * header fields start */
    unsigned int flags;
    /* The record's extras: their class (a strong reference), or NULL when the record
     * had none; the numbers of the fields the flags say were there. */
    PyTypeObject *extras_type;
    unsigned long long trace_high, trace_low, span_id; /* trace_id >> 64, its low 64 bits */
    long long bytes_received, close_code;
    /* The record's notes (the fields the application added): NULL for None, else the
     * dict itself, a strong reference: an exact dict of str keys and values of the
     * JSON scalar types (None, bool, int, float, str), which can be in no cycle and
     * which nothing changes (the middlewares' copy); the formats read it as they read
     * a Record's. */
    PyObject *notes;
    /* The texts, one after the other, then each request header field as the two
     * sizes of its name and value (uint32_t, unaligned) followed by their bytes: a
     * pair's bytes, or the ASCII of a str pair's name or an environ's key and the
     * latin-1 of its value. */
    char data[];
} Packed;

extern PyType_Spec packed_spec;

/* The type's tp_dealloc, by which a Packed is recognised without the module's state
 * (the type cannot be subclassed). */
void packed_dealloc(PyObject *self);

static inline int
packed_check(PyObject *object)
{
    return Py_TYPE(object)->tp_dealloc == packed_dealloc;
}

/* The request header fields a Packed keeps: those named, or all. */
typedef struct {
    PyObject *names;   /* a tuple of lower-case names (bytes), or NULL for all */
    uint64_t lengths;  /* bit n: a name of n bytes (bit 63: of 63 or more), so that
                        * most fields are passed over by their length alone */
} PackedKeeps;

/* The keeps for `names`, the header fields a log's lines read
 * (AccessLog.request_header_names: lower-case bytes, or None when they may read any):
 * 0, or -1 with TypeError or ValueError for names of another kind.  Released with
 * packed_keeps_clear. */
int packed_keeps(PyObject *names, PackedKeeps *keeps);

static inline void
packed_keeps_clear(PackedKeeps *keeps)
{
    Py_CLEAR(keeps->names);
}

/* A new Packed of `record`, made with `type` (the module's Packed type), holding the
 * header fields `keeps` names (packed_from_fields); NULL with no exception set when the record has another shape than the one packed (it is then
 * queued as it is), NULL with an exception on error. */
PyObject *packed_from_record(PyTypeObject *type, PyObject *record, const PackedKeeps *keeps);

/* The extras of a record not made yet either: their class and their EXTRAS_FIELDS
 * fields (extras.h), borrowed. */
typedef struct {
    PyTypeObject *type;
    PyObject *const *fields;
} ExtrasFields;

/* packed_from_record for a record of `record_type` not made yet: its times, and its
 * other fields in `fields`, indexed as a Record's (TIME and DURATION not read); its
 * extras fields[EXTRAS], or `learnt` when not NULL (fields[EXTRAS] then not read); its
 * bytes sent fields[BYTES_SENT], or *sent when `sent` is not NULL (fields[BYTES_SENT]
 * then not read: a count past the small ints is an int made for nothing here).
 * `keeps`: the header fields kept (NULL: all); an environ's picked fields (WSGI, which
 * picks what the log reads) are all kept. */
PyObject *packed_from_fields(PyTypeObject *type, PyTypeObject *record_type, double time,
                             double duration, PyObject *const *fields,
                             const ExtrasFields *learnt, const long long *sent,
                             const PackedKeeps *keeps);

/* The Record `packed` holds, equal to the one it was made of but for the header fields
 * it did not keep: a new reference. */
PyObject *packed_record(PyObject *packed);

/* A new Packed of the record `packed` holds (which has no notes) with `notes`, a dict
 * of the kinds packed (packed.c's pack_notes, which measures them: the new one's cost
 * is the record's).  NULL with no exception for notes of another kind, NULL with an
 * exception on error. */
PyObject *packed_with_notes(Packed *packed, PyObject *notes);

/* The record's notes: the dict, or None; borrowed from the Packed, which the caller
 * holds. */
static inline PyObject *
packed_notes(Packed *packed)
{
    return packed->notes != NULL ? packed->notes : Py_None;
}

/* The bytes of one of the texts. */
static inline const char *
packed_text(Packed *packed, int which, Py_ssize_t *size)
{
    Py_ssize_t start = which == 0 ? 0 : packed->ends[which - 1];
    *size = packed->ends[which] - start;
    return packed->data + start;
}

/* A field of a Packed record's extras as the formats write it (scalar.h): the kinds a
 * packed field may be; PACKED_VALUE_OTHER for the trace, which is no scalar. */
typedef enum {
    PACKED_VALUE_NONE,
    PACKED_VALUE_FALSE,
    PACKED_VALUE_TRUE,
    PACKED_VALUE_INT,  /* number */
    PACKED_VALUE_TEXT, /* text, size: UTF-8 with surrogatepass */
    PACKED_VALUE_OTHER,
} PackedValueKind;

typedef struct {
    PackedValueKind kind;
    long long number;
    const char *text;
    Py_ssize_t size;
} PackedValue;

/* The field `index` (extras.h's EXTRAS_*) of the record's extras: NONE when it had
 * none. */
void packed_extra(Packed *packed, int index, PackedValue *value);

/* Walking the request header fields: start with packed_fields(), then
 * packed_next_field() gives each name and value until it returns 0. */
typedef struct {
    const char *at;
    Py_ssize_t left;
} PackedFields;

/* Inline: a line's header lookups walk the fields several times each. */
static inline void
packed_fields(Packed *packed, PackedFields *fields)
{
    fields->at = packed->data + packed->ends[PACKED_TEXTS - 1];
    fields->left = packed->header_count;
}

static inline int
packed_next_field(PackedFields *fields, const char **name, Py_ssize_t *name_size,
                  const char **value, Py_ssize_t *value_size)
{
    if (fields->left == 0) {
        return 0;
    }
    uint32_t sizes[2];
    memcpy(sizes, fields->at, sizeof(sizes));
    *name = fields->at + sizeof(sizes);
    *name_size = sizes[0];
    *value = *name + sizes[0];
    *value_size = sizes[1];
    fields->at = *value + sizes[1];
    fields->left--;
    return 1;
}

/* `records` (a sequence) as a new list in which each Packed is replaced by its Record
 * (_core.CompiledFirst's fallback to the pure-Python core). */
PyObject *packed_unpacked(PyObject *records);

#endif
