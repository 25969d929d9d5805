/* The queue of records waiting for the writer (see queue.h). */
#include "engine/queue.h"

#include "common/compat.h"

#define SLOT(queue, i) ((queue)->items[((queue)->head + (i)) & ((queue)->capacity - 1)])

/* Moves the items into a new array of `capacity` slots (a power of two, at least the
 * length), the oldest first.  0, or -1 with MemoryError; the queue is unchanged then.
 * Allocates with PyMem_*, which never runs Python code (no collection): safe inside
 * a critical section. */
static int
resize(Queue *queue, Py_ssize_t capacity)
{
    if ((size_t)capacity > PY_SSIZE_T_MAX / sizeof(PyObject *)) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PyMem_Malloc((size_t)capacity * sizeof(PyObject *));
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < queue->length; i++) {
        items[i] = SLOT(queue, i);
    }
    PyMem_Free(queue->items);
    queue->items = items;
    queue->capacity = capacity;
    queue->head = 0;
    return 0;
}

Py_ssize_t
queue_append(Queue *queue, PyObject *item)
{
    Py_ssize_t length = -1;
    Py_BEGIN_CRITICAL_SECTION(queue);
    if (queue->length < queue->capacity
        || resize(queue, queue->capacity ? 2 * queue->capacity : QUEUE_MIN_CAPACITY) == 0) {
        SLOT(queue, queue->length) = Py_NewRef(item);
        length = ++queue->length;
    }
    Py_END_CRITICAL_SECTION();
    return length;
}

Py_ssize_t
queue_length(Queue *queue)
{
    Py_ssize_t length;
    Py_BEGIN_CRITICAL_SECTION(queue);
    length = queue->length;
    Py_END_CRITICAL_SECTION();
    return length;
}

/* Empties the queue and drops what it held, oldest first; how many there were.  The
 * ring is detached inside the critical section and its references dropped after it:
 * a record's finalizer may then submit to this queue, which is empty and whole. */
static Py_ssize_t
drop_everything(Queue *queue)
{
    Queue held = {.items = NULL};
    Py_BEGIN_CRITICAL_SECTION(queue);
    held.items = queue->items;
    held.capacity = queue->capacity;
    held.head = queue->head;
    held.length = queue->length;
    queue->items = NULL;
    queue->capacity = queue->head = queue->length = 0;
    Py_END_CRITICAL_SECTION();
    for (Py_ssize_t i = 0; i < held.length; i++) {
        Py_DECREF(SLOT(&held, i));
    }
    PyMem_Free(held.items);
    return held.length;
}

static PyObject *
queue_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Queue() takes no arguments");
        return NULL;
    }
    /* Zeroed: an empty queue with no array until the first append. */
    return type->tp_alloc(type, 0);
}

static PyObject *
queue_append_method(PyObject *self, PyObject *item)
{
    if (queue_append((Queue *)self, item) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The oldest min(count, len) records as a new list: moved out of the queue when
 * `remove` (a take), else copied (a snapshot).  The list is made before the critical
 * section: making it may run a collection, and with it a finalizer that appends or
 * withdraws a record; fewer may wait by then (only withdrawals remove otherwise), and
 * the list is cut to those.  NULL on error. */
static PyObject *
oldest(Queue *queue, Py_ssize_t count, int remove)
{
    Py_ssize_t wanted = queue_length(queue);
    if (wanted > count) {
        wanted = count;
    }
    PyObject *list = PyList_New(wanted);
    if (list == NULL) {
        return NULL;
    }
    Py_ssize_t got;
    Py_BEGIN_CRITICAL_SECTION(queue);
    got = queue->length < wanted ? queue->length : wanted;
    for (Py_ssize_t i = 0; i < got; i++) {
        /* Moved, the queue's reference becomes the list's. */
        PyList_SET_ITEM(list, i, remove ? SLOT(queue, i) : Py_NewRef(SLOT(queue, i)));
    }
    if (remove) {
        queue->head = (queue->head + got) & (queue->capacity - 1);
        queue->length -= got;
        if (queue->length == 0) {
            queue->head = 0;
        }
        if (queue->capacity > QUEUE_MIN_CAPACITY && queue->length < queue->capacity / 8) {
            /* Mostly empty after a burst: give half back (a failure keeps the array). */
            if (resize(queue, queue->capacity / 2) < 0) {
                PyErr_Clear();
            }
        }
    }
    Py_END_CRITICAL_SECTION();
    if (got < wanted && PyList_SetSlice(list, got, wanted, NULL) < 0) {
        Py_DECREF(list);
        return NULL;
    }
    return list;
}

/* take(count): the oldest min(count, len) records, as a list, removed from the queue. */
static PyObject *
queue_take(PyObject *self, PyObject *argument)
{
    Py_ssize_t count = PyNumber_AsSsize_t(argument, PyExc_OverflowError);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "Queue.take(): count must not be negative, not %zd",
                     count);
        return NULL;
    }
    return oldest((Queue *)self, count, 1);
}

/* withdraw(record): remove `record` itself (by identity) if it waits; whether it did. */
static PyObject *
queue_withdraw(PyObject *self, PyObject *record)
{
    Queue *queue = (Queue *)self;
    PyObject *found = NULL;
    Py_BEGIN_CRITICAL_SECTION(queue);
    for (Py_ssize_t i = 0; i < queue->length; i++) {
        if (SLOT(queue, i) == record) {
            found = record;
            for (Py_ssize_t j = i + 1; j < queue->length; j++) {
                SLOT(queue, j - 1) = SLOT(queue, j);
            }
            queue->length--;
            break;
        }
    }
    Py_END_CRITICAL_SECTION();
    if (found == NULL) {
        Py_RETURN_FALSE;
    }
    Py_DECREF(found); /* the queue's reference: the caller still holds its own */
    Py_RETURN_TRUE;
}

/* drain(): remove every record; how many there were. */
static PyObject *
queue_drain(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(drop_everything((Queue *)self));
}

static Py_ssize_t
queue_sq_length(PyObject *self)
{
    return queue_length((Queue *)self);
}

/* iter(queue): over a snapshot of the waiting records, oldest first. */
static PyObject *
queue_iter(PyObject *self)
{
    PyObject *snapshot = oldest((Queue *)self, PY_SSIZE_T_MAX, 0);
    if (snapshot == NULL) {
        return NULL;
    }
    PyObject *iterator = PyObject_GetIter(snapshot);
    Py_DECREF(snapshot);
    return iterator;
}

static int
queue_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Queue *queue = (Queue *)self;
    for (Py_ssize_t i = 0; i < queue->length; i++) {
        Py_VISIT(SLOT(queue, i));
    }
    return 0;
}

static int
queue_clear(PyObject *self)
{
    drop_everything((Queue *)self);
    return 0;
}

static void
queue_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    drop_everything((Queue *)self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef queue_methods[] = {
    {"append", queue_append_method, METH_O,
     "append(record)\n\nAdd `record` at the end."},
    {"take", queue_take, METH_O,
     "take(count) -> list\n\nRemove and return the oldest min(count, len(queue)) records."},
    {"withdraw", queue_withdraw, METH_O,
     "withdraw(record) -> bool\n\nRemove `record` itself (by identity) if it waits; whether "
     "it did."},
    {"drain", queue_drain, METH_NOARGS,
     "drain() -> int\n\nRemove every record; how many there were."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot queue_slots[] = {
    {Py_tp_doc, "Queue()\n--\n\n"
                "The records waiting for the writer: engine/_queue.Pending in C "
                "(csrc/engine/queue.h)."},
    {Py_tp_new, queue_new},
    {Py_tp_dealloc, queue_dealloc},
    {Py_tp_traverse, queue_traverse},
    {Py_tp_clear, queue_clear},
    {Py_tp_iter, queue_iter},
    {Py_tp_methods, queue_methods},
    {Py_sq_length, queue_sq_length},
    {0, NULL},
};

PyType_Spec queue_spec = {
    .name = "boundlog._speedups.Queue",
    .basicsize = sizeof(Queue),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = queue_slots,
};
