/* The queue of records waiting for the writer: engine/_queue.Pending as a C type, Queue.
 *
 * Why a type of its own rather than a deque: the writer takes a batch at a time, and a
 * deque gives records back one call at a time (popleft through map(): ~130 instructions
 * a record on the writer's side), while the hand-off appends and then asks the length
 * (two calls through the C API).  Here a take moves a batch's pointers into a list in
 * one pass, and the hand-off's append returns the new length.  It is also where the
 * records will be kept as bytes rather than objects (the ring the queue becomes), so
 * the Admission already talks to it through the operations it needs, not a deque's.
 *
 * Each operation is atomic, with or without the GIL (a critical section on the queue
 * on free-threaded builds, as a deque's own), and none calls Python code while the
 * queue is half changed: references are dropped only once it is consistent again, so
 * a finalizer that submits a record (Admission.offer_unlocked) finds it whole. */
#ifndef BOUNDLOG_QUEUE_H
#define BOUNDLOG_QUEUE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A ring of strong references: items[(head + i) & (capacity - 1)] for i < length.
 * capacity is 0 (no array yet) or a power of two; it doubles when full, and halves
 * when a take leaves it mostly empty, down to QUEUE_MIN_CAPACITY. */
typedef struct {
    PyObject_HEAD
    PyObject **items;
    Py_ssize_t capacity;
    Py_ssize_t head;
    Py_ssize_t length;
} Queue;

#define QUEUE_MIN_CAPACITY 64

extern PyType_Spec queue_spec;

/* Appends a new reference to `item` and returns the queue's new length, or -1 with
 * MemoryError. */
Py_ssize_t queue_append(Queue *queue, PyObject *item);

/* How many records wait. */
Py_ssize_t queue_length(Queue *queue);

#endif
