/* The hand-off to the queue: _queue.Admission.offer in C, for the request path.
 *
 * Line for line the reference's: check the bound and the closed flag, append to the
 * deque (atomic, with or without the GIL), wake the writer if the queue reached the
 * length it asked to be woken at, and take the record back if the log closed
 * meanwhile.  The rare transitions (waking, withdrawing) call the Admission's own
 * methods, which take its lock; this takes none.  Its attributes are read afresh each
 * time: a fork gives the Admission a new deque (reset_after_fork). */
#include "asgi.h"

static PyObject *
attribute(Middleware *middleware, int name)
{
    return PyObject_GetAttr(middleware->admission, middleware->names[name]);
}

/* bool(admission._closed): 1, 0, or -1 on error. */
static int
closed(Middleware *middleware)
{
    PyObject *flag = attribute(middleware, NAME_CLOSED);
    if (flag == NULL) {
        return -1;
    }
    int rc = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    return rc;
}

/* Appends `record` and returns the queue's new length, or -1 on error. */
static Py_ssize_t
append(Middleware *middleware, PyObject *pending, PyObject *record)
{
    PyObject *done = PyObject_CallMethodOneArg(pending, middleware->names[NAME_APPEND], record);
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    return PyObject_Size(pending);
}

/* Calls admission.<name>(*args) and returns bool(result): 1, 0, or -1. */
static int
call_admission(Middleware *middleware, int name, PyObject *argument)
{
    PyObject *method = attribute(middleware, name);
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

int
handoff_offer(Middleware *middleware, PyObject *record)
{
    /* Hot path, once per request: no formatting, no I/O, and no lock except on the
     * rare transitions (see _queue.py's module docstring). */
    PyObject *pending = attribute(middleware, NAME_PENDING);
    if (pending == NULL) {
        return -1;
    }
    int rc = -1;
    Py_ssize_t length = PyObject_Size(pending);
    int is_closed = length < 0 ? -1 : closed(middleware);
    if (is_closed < 0) {
        goto done;
    }
    if (length >= middleware->max_queue || is_closed) {
        rc = 0;
        goto done;
    }
    length = append(middleware, pending, record);
    PyObject *wake_at = length < 0 ? NULL : attribute(middleware, NAME_WAKE_AT);
    Py_ssize_t threshold = wake_at == NULL ? -1 : PyLong_AsSsize_t(wake_at);
    Py_XDECREF(wake_at);
    if (threshold == -1 && PyErr_Occurred()) {
        goto done;
    }
    if (length >= threshold && call_admission(middleware, NAME_WAKE_WRITER, NULL) < 0) {
        goto done;
    }
    is_closed = closed(middleware);
    if (is_closed < 0) {
        goto done;
    }
    if (is_closed) {
        int withdrawn = call_admission(middleware, NAME_WITHDRAW, record);
        rc = withdrawn < 0 ? -1 : !withdrawn;
    }
    else {
        rc = 1;
    }
done:
    Py_DECREF(pending);
    return rc;
}
