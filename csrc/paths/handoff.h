/* The hand-off to the queue: _admission.Admission.offer as a C type, Handoff.
 *
 * `_speedups.Handoff(admission)` is a callable, `handoff(record) -> bool`, that does
 * what `admission.offer(record)` does; AccessLog._offer is one when the C core is in
 * use, so every integration that calls log._offer (WSGI, gunicorn, aiohttp,
 * http.server) runs it, and the ASGI C request path calls handoff_offer() on it
 * directly, without a Python call. */
#ifndef BOUNDLOG_HANDOFF_H
#define BOUNDLOG_HANDOFF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "record/packed.h"

/* The Admission's attribute and method names the hand-off reads, interned once per
 * Handoff, not kept in the module's state (module_state.h).  The first HANDOFF_SLOTS
 * are the attributes read per call. */
enum {
    HANDOFF_PENDING, HANDOFF_CLOSED, HANDOFF_WAKE_AT, HANDOFF_SLOTS,
    HANDOFF_APPEND = HANDOFF_SLOTS, HANDOFF_WAKE_WRITER, HANDOFF_WITHDRAW, HANDOFF_OFFER_LARGE,
    HANDOFF_NAMES
};

/* Every field is set when the Handoff is made and never changes: a call needs no
 * lock or critical section, with or without the GIL. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *admission;  /* the _admission.Admission, a strong reference */
    Py_ssize_t max_queue; /* admission._max_queue, which never changes */
    Py_ssize_t share;     /* admission._share: the bytes a record may keep uncounted */
    PyObject *names[HANDOFF_NAMES];
    /* The shortcuts the type of the Admission allows, found when the Handoff is made:
     * what attribute lookup would find then, without looking each time.  A slot's
     * member descriptor (read with PyMember_GetOne, a strong reference, atomic on
     * free-threaded builds), or NULL to read the attribute; deque.append's method
     * descriptor and the type it appends to, or NULL to call pending.append. */
    PyObject *slot_descriptors[HANDOFF_SLOTS];
    PyMemberDef *slots[HANDOFF_SLOTS];
    PyObject *queue_type;
    PyObject *queue_append;
    /* engine/queue.h's Queue, whose instances (the Admission's queue when the C core
     * runs) are appended to and measured without a call through the C API. */
    PyTypeObject *c_queue_type;
    /* The Packed type (record/packed.h) when records are queued packed, or NULL; and
     * the header fields a packed record keeps (packed_keeps), or NULL for all. */
    PyTypeObject *packed_type;
    PackedKeeps keeps;
} Handoff;

extern PyType_Spec handoff_spec;

/* Hands `record` to the queue as Admission.offer does: 1 accepted, 0 no room (not
 * counted), -1 on error.  A Handoff made with packs=True queues a record of the usual
 * shape as a Packed (record/packed.h), for a writer that formats those in C, holding
 * the header fields named in its keeps= (the log's request_header_names). */
int handoff_offer(Handoff *handoff, PyObject *record);

/* Hands `record` over as log.submit does, for a request path that may block: the
 * lock-free offer first, then `submit` (log.submit: the policy waits or counts the
 * drop) when the queue has no room.  0, or -1 on error. */
int handoff_submit(Handoff *handoff, PyObject *submit, PyObject *record);

#endif
