/* The hand-off to the queue: _admission.Admission.offer in C (see handoff.h).
 *
 * Line for line the reference's: check the bound, then the closed flag, append to the
 * deque (atomic, with or without the GIL), wake the writer if the queue reached the
 * length it asked to be woken at, and take the record back if the log closed
 * meanwhile.  The rare transitions (waking, withdrawing) call the Admission's own
 * methods, which take its lock; this takes none.  Its attributes are read afresh each
 * call, as strong references: a fork gives the Admission a new deque
 * (reset_after_fork), and the writer changes _wake_at and _closed from its thread. */
#include "paths/handoff.h"

#include <stddef.h>

#include "common/compat.h"
#include "engine/queue.h"
#include "module_state.h"
#include "record/budget.h"
#include "record/packed.h"
#include "record/record.h"

static const char *const name_strings[HANDOFF_NAMES] = {
    [HANDOFF_PENDING] = "_pending",
    [HANDOFF_CLOSED] = "_closed",
    [HANDOFF_WAKE_AT] = "_wake_at",
    [HANDOFF_APPEND] = "append",
    [HANDOFF_WAKE_WRITER] = "_wake_writer",
    [HANDOFF_WITHDRAW] = "_withdraw",
    [HANDOFF_OFFER_LARGE] = "_offer_large",
};

static PyObject *
attribute(Handoff *handoff, int name)
{
    if (name < HANDOFF_SLOTS && handoff->slots[name] != NULL) {
#ifndef Py_GIL_DISABLED
        /* With the GIL, a slot is a pointer nobody changes while this thread holds it:
         * read it as the member descriptor would, without its generic dispatch.  An
         * empty slot goes to PyMember_GetOne for the AttributeError. */
        PyObject *value = *(PyObject **)((char *)handoff->admission
                                         + handoff->slots[name]->offset);
        if (value != NULL) {
            return Py_NewRef(value);
        }
#endif
        return PyMember_GetOne((const char *)handoff->admission, handoff->slots[name]);
    }
    return PyObject_GetAttr(handoff->admission, handoff->names[name]);
}

/* bool(admission._closed): 1, 0, or -1 on error. */
static int
closed(Handoff *handoff)
{
    PyObject *flag = attribute(handoff, HANDOFF_CLOSED);
    if (flag == NULL) {
        return -1;
    }
    int rc = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    return rc;
}

/* length >= admission._wake_at: 1, 0, or -1 on error.  _wake_at is an int (2**62 when
 * no wake-up is wanted); anything else is compared as Python compares it. */
static int
reached(Handoff *handoff, Py_ssize_t length)
{
    PyObject *wake_at = attribute(handoff, HANDOFF_WAKE_AT);
    if (wake_at == NULL) {
        return -1;
    }
    int rc;
    if (PyLong_CheckExact(wake_at)) {
        int overflow;
        long long threshold = PyLong_AsLongLongAndOverflow(wake_at, &overflow);
        if (overflow) {
            rc = overflow < 0; /* past a long long: below any length, or above */
        }
        else if (threshold == -1 && PyErr_Occurred()) {
            rc = -1;
        }
        else {
            rc = (long long)length >= threshold;
        }
    }
    else {
        PyObject *size = PyLong_FromSsize_t(length);
        rc = size == NULL ? -1 : PyObject_RichCompareBool(size, wake_at, Py_GE);
        Py_XDECREF(size);
    }
    Py_DECREF(wake_at);
    return rc;
}

/* len(pending), or -1 on error. */
static Py_ssize_t
length_of(Handoff *handoff, PyObject *pending)
{
    if (Py_IS_TYPE(pending, handoff->c_queue_type)) {
        return queue_length((Queue *)pending);
    }
    return PyObject_Size(pending);
}

/* Appends `record` and returns the queue's new length, or -1 on error. */
static Py_ssize_t
append(Handoff *handoff, PyObject *pending, PyObject *record)
{
    if (Py_IS_TYPE(pending, handoff->c_queue_type)) {
        return queue_append((Queue *)pending, record);
    }
    PyObject *done;
    if (handoff->queue_append != NULL && (PyObject *)Py_TYPE(pending) == handoff->queue_type) {
        PyObject *args[2] = {pending, record};
        done = PyObject_Vectorcall(handoff->queue_append, args, 2, NULL);
    }
    else {
        done = PyObject_CallMethodOneArg(pending, handoff->names[HANDOFF_APPEND], record);
    }
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    return PyObject_Size(pending);
}

/* Calls admission.<name>(*args) and returns bool(result): 1, 0, or -1. */
static int
call_admission(Handoff *handoff, int name, PyObject *argument)
{
    PyObject *method = attribute(handoff, name);
    if (method == NULL) {
        return -1;
    }
    PyObject *result = argument == NULL ? PyObject_CallNoArgs(method)
                                        : PyObject_CallOneArg(method, argument);
    Py_DECREF(method);
    if (result == NULL) {
        return -1;
    }
    int rc = PyObject_IsTrue(result);
    Py_DECREF(result);
    return rc;
}

/* A record's fields _budget.record_cost reads. */
enum { RECORD_PATH = 4, RECORD_QUERY = 5, RECORD_HEADERS = 9, RECORD_NOTES = 11 };

/* Whether `record` keeps no more than the share of client and application bytes,
 * by _budget.record_cost, for the records the integrations make: a header list of
 * pairs of bytes or str, or an environ (dict) of them, and notes of str names.  0 for any other
 * record: the reference (_offer_large) measures it and decides. */
static int
within_share(Handoff *handoff, PyObject *record)
{
    if (packed_check(record)) {
        return ((Packed *)record)->cost <= handoff->share;
    }
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) <= RECORD_NOTES) {
        return 0;
    }
    PyObject *notes = PyTuple_GET_ITEM(record, RECORD_NOTES);
    if (notes != Py_None && !PyDict_CheckExact(notes)) {
        return 0;
    }
    Py_ssize_t path = budget_text_length(PyTuple_GET_ITEM(record, RECORD_PATH));
    Py_ssize_t query = budget_text_length(PyTuple_GET_ITEM(record, RECORD_QUERY));
    Py_ssize_t size = 0;
    if (path < 0 || query < 0
        || !budget_headers_size(PyTuple_GET_ITEM(record, RECORD_HEADERS), &size)) {
        return 0;
    }
    size += path + query;
    Py_ssize_t share = handoff->share;
    int ok = size <= share;
    if (ok && notes != Py_None) {
        /* The application's fields: names and text values, as record_cost counts them. */
        Py_BEGIN_CRITICAL_SECTION(notes);
        Py_ssize_t position = 0;
        PyObject *key, *value;
        while (ok && PyDict_Next(notes, &position, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) {
                ok = 0;
            }
            else {
                size += FIELD_OVERHEAD + PyUnicode_GET_LENGTH(key)
                        + (PyUnicode_CheckExact(value) ? PyUnicode_GET_LENGTH(value) : 0);
                ok = size <= share;
            }
        }
        Py_END_CRITICAL_SECTION();
    }
    return ok && size <= share;
}

int
handoff_offer(Handoff *handoff, PyObject *record)
{
    /* Hot path, once per request: no formatting, no I/O, and no lock except on the
     * rare transitions (see engine/_admission.py's module docstring). */
    PyObject *packed = NULL;
    if (handoff->packed_type != NULL) {
        /* Queued in its place; the caller's record is freed as soon as it lets go. */
        packed = packed_from_record(handoff->packed_type, record, &handoff->keeps);
        if (packed == NULL && PyErr_Occurred()) {
            return -1;
        }
        if (packed != NULL) {
            record = packed;
        }
    }
    PyObject *pending = attribute(handoff, HANDOFF_PENDING);
    if (pending == NULL) {
        Py_XDECREF(packed);
        return -1;
    }
    int rc = -1;
    Py_ssize_t length = length_of(handoff, pending);
    if (length < 0) {
        goto done;
    }
    /* `len(pending) < self._max_queue and not self._closed`: _closed is not read when
     * the queue is full. */
    int is_closed = length >= handoff->max_queue ? 1 : closed(handoff);
    if (is_closed != 0) {
        rc = is_closed < 0 ? -1 : 0;
        goto done;
    }
    if (!within_share(handoff, record)) {
        /* Over its share of the byte budget (or not measured here): the reference's
         * slow path charges the excess under its lock, or refuses the record. */
        rc = call_admission(handoff, HANDOFF_OFFER_LARGE, record);
        goto done;
    }
    length = append(handoff, pending, record);
    int wake = length < 0 ? -1 : reached(handoff, length);
    if (wake < 0 || (wake && call_admission(handoff, HANDOFF_WAKE_WRITER, NULL) < 0)) {
        goto done;
    }
    is_closed = closed(handoff);
    if (is_closed > 0) {
        int withdrawn = call_admission(handoff, HANDOFF_WITHDRAW, record);
        rc = withdrawn < 0 ? -1 : !withdrawn;
    }
    else {
        rc = is_closed < 0 ? -1 : 1;
    }
done:
    Py_DECREF(pending);
    Py_XDECREF(packed);
    return rc;
}

int
handoff_submit(Handoff *handoff, PyObject *submit, PyObject *record)
{
    int accepted = handoff_offer(handoff, record);
    if (accepted == 0) {
        PyObject *result = PyObject_CallOneArg(submit, record);
        accepted = result == NULL ? -1 : 1;
        Py_XDECREF(result);
    }
    return accepted < 0 ? -1 : 0;
}

static PyObject *
handoff_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Handoff takes exactly one argument, the record");
        return NULL;
    }
    int rc = handoff_offer((Handoff *)self, args[0]);
    if (rc < 0) {
        return NULL;
    }
    return PyBool_FromLong(rc);
}

/* Finds the shortcuts (see handoff.h) that `admission`'s type allows: its attributes
 * are slots (Admission's __slots__) read by the generic lookup, and its queue is a
 * deque (or a type whose append is a C method).  What is not found stays NULL, and is
 * then looked up at each call, as Python does.  0, or -1 on error. */
static int
find_shortcuts(Handoff *handoff)
{
    PyObject *type = (PyObject *)Py_TYPE(handoff->admission);
    if (Py_TYPE(handoff->admission)->tp_getattro != PyObject_GenericGetAttr) {
        return 0;
    }
    for (int i = 0; i < HANDOFF_SLOTS; i++) {
        /* On the class, a member descriptor is returned as itself. */
        PyObject *descriptor = PyObject_GetAttr(type, handoff->names[i]);
        if (descriptor == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                return -1;
            }
            PyErr_Clear();
            continue;
        }
        if (Py_IS_TYPE(descriptor, &PyMemberDescr_Type)) {
            PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
            if (member->type == Py_T_OBJECT_EX
#ifdef Py_RELATIVE_OFFSET
                && !(member->flags & Py_RELATIVE_OFFSET)
#endif
            ) {
                handoff->slots[i] = member;
                handoff->slot_descriptors[i] = Py_NewRef(descriptor);
            }
        }
        Py_DECREF(descriptor);
    }
    PyObject *pending = attribute(handoff, HANDOFF_PENDING);
    if (pending == NULL) {
        /* No queue yet: every call looks up pending.append. */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    PyObject *queue_type = Py_NewRef(Py_TYPE(pending));
    Py_DECREF(pending);
    PyObject *append = PyObject_GetAttr(queue_type, handoff->names[HANDOFF_APPEND]);
    if (append == NULL || !Py_IS_TYPE(append, &PyMethodDescr_Type)) {
        Py_DECREF(queue_type);
        Py_XDECREF(append);
        PyErr_Clear();
        return 0;
    }
    handoff->queue_type = queue_type;
    handoff->queue_append = append;
    return 0;
}

static PyObject *
handoff_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *admission;
    int packs = 0;
    PyObject *names = Py_None;
    char *keywords[] = {"admission", "packs", "keeps", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$pO:Handoff", keywords, &admission,
                                     &packs, &names)) {
        return NULL;
    }
    PyObject *max = PyObject_GetAttrString(admission, "_max_queue");
    Py_ssize_t max_queue = max == NULL ? -1 : PyLong_AsSsize_t(max);
    Py_XDECREF(max);
    if (max_queue < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "Handoff(): admission._max_queue must not be negative");
        }
        return NULL;
    }
    PyObject *share_object = PyObject_GetAttrString(admission, "_share");
    Py_ssize_t share = share_object == NULL ? -1 : PyLong_AsSsize_t(share_object);
    Py_XDECREF(share_object);
    if (share < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "Handoff(): admission._share must not be negative");
        }
        return NULL;
    }
    ModuleState *state = PyType_GetModuleState(type);
    if (state == NULL) {
        return NULL;
    }
    Handoff *handoff = (Handoff *)type->tp_alloc(type, 0);
    if (handoff == NULL) {
        return NULL;
    }
    handoff->vectorcall = handoff_vectorcall;
    handoff->admission = Py_NewRef(admission);
    handoff->c_queue_type = (PyTypeObject *)Py_NewRef(state->queue_type);
    if (packs) {
        handoff->packed_type = (PyTypeObject *)Py_NewRef(state->packed_type);
        if (packed_keeps(names, &handoff->keeps) < 0) {
            Py_DECREF(handoff);
            return NULL;
        }
    }
    handoff->max_queue = max_queue;
    handoff->share = share;
    /* Zeroed by tp_alloc: a failure here leaves NULLs for handoff_clear. */
    for (int i = 0; i < HANDOFF_NAMES; i++) {
        handoff->names[i] = PyUnicode_InternFromString(name_strings[i]);
        if (handoff->names[i] == NULL) {
            Py_DECREF(handoff);
            return NULL;
        }
    }
    if (find_shortcuts(handoff) < 0) {
        Py_DECREF(handoff);
        return NULL;
    }
    return (PyObject *)handoff;
}

static int
handoff_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Handoff *handoff = (Handoff *)self;
    Py_VISIT(handoff->admission);
    Py_VISIT(handoff->queue_type);
    Py_VISIT(handoff->queue_append);
    Py_VISIT(handoff->packed_type);
    Py_VISIT(handoff->c_queue_type);
    Py_VISIT(handoff->keeps.names);
    for (int i = 0; i < HANDOFF_SLOTS; i++) {
        Py_VISIT(handoff->slot_descriptors[i]);
    }
    return 0;
}

static int
handoff_clear(PyObject *self)
{
    Handoff *handoff = (Handoff *)self;
    Py_CLEAR(handoff->admission);
    for (int i = 0; i < HANDOFF_NAMES; i++) {
        Py_CLEAR(handoff->names[i]);
    }
    for (int i = 0; i < HANDOFF_SLOTS; i++) {
        handoff->slots[i] = NULL;
        Py_CLEAR(handoff->slot_descriptors[i]);
    }
    Py_CLEAR(handoff->queue_type);
    Py_CLEAR(handoff->queue_append);
    Py_CLEAR(handoff->packed_type);
    Py_CLEAR(handoff->c_queue_type);
    packed_keeps_clear(&handoff->keeps);
    return 0;
}

static void
handoff_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    handoff_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef handoff_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(Handoff, vectorcall), Py_READONLY, NULL},
    {"admission", Py_T_OBJECT_EX, offsetof(Handoff, admission), Py_READONLY,
     "The Admission this hands records to."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot handoff_slots[] = {
    {Py_tp_doc, "Handoff(admission, *, packs=False, keeps=None): a callable,\n"
                "handoff(record) -> bool, that does what admission.offer(record) does\n"
                "(_admission.Admission.offer, the reference); with packs, a record of the\n"
                "usual shape is queued as a Packed (record/packed.h) holding the header\n"
                "fields named in keeps (lower-case bytes; None: all)."},
    {Py_tp_new, handoff_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, handoff_members},
    {Py_tp_traverse, handoff_traverse},
    {Py_tp_clear, handoff_clear},
    {Py_tp_dealloc, handoff_dealloc},
    {0, NULL},
};

PyType_Spec handoff_spec = {
    .name = "boundlog._speedups.Handoff",
    .basicsize = sizeof(Handoff),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = handoff_slots,
};
