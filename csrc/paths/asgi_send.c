/* The send wrapper: what asgi.AccessLogMiddleware's counting_send does, per message.
 *
 * It returns the server's own awaitable for every message (no coroutine of its own),
 * and runs on the event loop for each of them: no formatting, no I/O, no lock.  The
 * record goes to the queue before the response's last message is handed to the
 * server, so a client never has a response whose record is not queued or counted.
 *
 * But for a log that reads notes: the application may still add fields once its
 * response has ended (Starlette's background tasks run after the last body message,
 * inside the application's call), so the record is held until the application returns
 * (asgi_exchange.c's pending_record) and then takes the notes as they are. */
#include "paths/asgi.h"

#include <stddef.h>

#include "common/compat.h"

static PyObject *capture_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames);

Capture *
capture_new(Middleware *middleware, PyObject *scope, PyObject *send, double started)
{
    Capture *capture = PyObject_GC_New(Capture, middleware->capture_type);
    if (capture == NULL) {
        return NULL;
    }
    capture->middleware = (Middleware *)Py_NewRef(middleware);
    capture->scope = Py_NewRef(scope);
    capture->send = Py_NewRef(send);
    capture->response = NULL;
    capture->status = NULL;
    capture->sent_object = NULL;
    capture->notes = NULL;
    capture->request_id = NULL;
    capture->held = NULL;
    capture->counting_receive = NULL;
    capture->sent = 0;
    capture->started = started;
    capture->finished = 0;
    capture->vectorcall = capture_vectorcall;
    PyObject_GC_Track(capture);
    return capture;
}

/* What a message does to the counts: FORWARD it, or it ends the response (FINAL). */
enum { FORWARD, FINAL };

static int
body_ends(Capture *capture, PyObject *message)
{
    PyObject **names = capture->middleware->names;
    PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
    PyObject *body = empty == NULL ? NULL
                     : asgi_get_hinted(message, names[NAME_BODY], empty,
                                       &capture->middleware->hints[HINT_BODY]);
    Py_XDECREF(empty);
    if (body == NULL) {
        return -1;
    }
    Py_ssize_t size = PyObject_Length(body);
    Py_DECREF(body);
    if (size < 0) {
        return -1;
    }
    if (capture->sent > PY_SSIZE_T_MAX - size) {
        /* Python's sum has no bound: past Py_ssize_t, what was counted so far moves
         * into sent_object, an int, to which the record adds the rest. */
        PyObject *counted = PyLong_FromSsize_t(capture->sent);
        PyObject *total = counted == NULL ? NULL
                          : capture->sent_object == NULL
                              ? Py_NewRef(counted)
                              : PyNumber_Add(capture->sent_object, counted);
        Py_XDECREF(counted);
        if (total == NULL) {
            return -1;
        }
        Py_XSETREF(capture->sent_object, total);
        capture->sent = 0;
    }
    capture->sent += size;
    int more = asgi_flag(message, names[NAME_MORE_BODY]);
    PyObject *response = Py_XNewRef(capture->response); /* held: .get() may run code */
    if (more == 0 && response != NULL) {
        /* A response that announced trailers ends with its last trailers message. */
        more = asgi_flag(response, names[NAME_TRAILERS]);
    }
    Py_XDECREF(response);
    return more < 0 ? -1 : more ? FORWARD : FINAL;
}

/* Counts `message`: FORWARD, FINAL, or -1 on error. */
static int
count(Capture *capture, PyObject *message)
{
    PyObject **names = capture->middleware->names;
    DictHint *hints = capture->middleware->hints;
    PyObject *kind = asgi_item_hinted(message, names[NAME_TYPE], &hints[HINT_MESSAGE_TYPE]);
    if (kind == NULL) {
        return -1;
    }
    int rc = FORWARD;
    int is;
    if ((is = asgi_is(kind, names[NAME_BODY_MESSAGE])) != 0) {
        rc = is < 0 ? -1 : body_ends(capture, message);
    }
    else if ((is = asgi_is(kind, names[NAME_START_MESSAGE])) != 0) {
        PyObject *status = is < 0 ? NULL
                           : asgi_item_hinted(message, names[NAME_STATUS], &hints[HINT_STATUS]);
        if (status != NULL && !PyLong_Check(status)) {
            /* No status code: 0, as asgi.py's counting_send says why. */
            Py_SETREF(status, PyLong_FromLong(0));
        }
        if (status == NULL) {
            rc = -1;
        }
        else {
            Py_XSETREF(capture->status, status);
            Py_XSETREF(capture->response, Py_NewRef(message));
        }
    }
    else if ((is = asgi_is(kind, names[NAME_TRAILERS_MESSAGE])) != 0) {
        int more = is < 0 ? -1 : asgi_flag(message, names[NAME_MORE_TRAILERS]);
        rc = more < 0 ? -1 : more ? FORWARD : FINAL;
    }
    else if ((is = asgi_is(kind, names[NAME_PATHSEND_MESSAGE])) != 0) {
        PyObject *response = is < 0 ? NULL
                             : capture->response != NULL ? Py_NewRef(capture->response)
                                                         : PyDict_New();
        PyObject *size = response == NULL ? NULL
                         : PyObject_CallFunctionObjArgs(capture->middleware->file_size,
                                                        response, message, NULL);
        Py_XDECREF(response);
        if (size == NULL) {
            rc = -1;
        }
        else {
            Py_XSETREF(capture->sent_object, size);
            capture->sent = 0;
            rc = FINAL;
        }
    }
    if (is < 0) {
        rc = -1;
    }
    Py_DECREF(kind);
    return rc;
}

/* The record of a response that just ended, marked handed over; NULL on error. */
static PyObject *
finish(Capture *capture)
{
    PyObject *status = capture->status != NULL ? Py_NewRef(capture->status) : PyLong_FromLong(0);
    if (status == NULL) {
        return NULL;
    }
    PyObject *record = asgi_record(capture, status, 1);
    Py_DECREF(status);
    if (record != NULL) {
        Py_CLEAR(capture->response);
        capture->finished = 1;
    }
    return record;
}

/* Counts `message` and sends it on, with the record before the last one.  Once the
 * response has ended, a message goes on uncounted: a server ignores what follows the
 * end (uvicorn raises), so it is no part of any record. */
static PyObject *
capture_send(Capture *capture, PyObject *message)
{
    PyObject *record = NULL;
    int rc;
    Py_BEGIN_CRITICAL_SECTION((PyObject *)capture);
    rc = capture->finished ? FORWARD : count(capture, message);
    if (rc == FINAL) {
        record = finish(capture);
        if (record == NULL) {
            rc = -1;
        }
        else if (capture->notes != NULL) {
            capture->held = record; /* stolen */
            held_add(&capture->middleware->held, 1);
            record = NULL;
            rc = FORWARD;
        }
    }
    Py_END_CRITICAL_SECTION();
    if (rc < 0) {
        return NULL;
    }
    if (rc == FORWARD) {
        return PyObject_CallOneArg(capture->send, message);
    }
    int accepted = handoff_offer((Handoff *)capture->middleware->handoff, record);
    PyObject *result = NULL;
    if (accepted > 0) {
        result = PyObject_CallOneArg(capture->send, message);
    }
    else if (accepted == 0) {
        /* No room: the policy decides (count the drop, or wait) before the message goes. */
        result = PyObject_CallFunctionObjArgs(capture->middleware->admit_then, record,
                                              capture->send, message, NULL);
    }
    Py_DECREF(record);
    return result;
}

static PyObject *
capture_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Capture *capture = (Capture *)self;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "send() takes exactly one argument, the message");
        return NULL;
    }
    if (capture->request_id == NULL) {
        return capture_send(capture, args[0]);
    }
    /* The id goes into the start message before it is counted, as in the reference:
     * the record's response headers are those the server is sent.  Set at creation
     * and never changed, request_id needs no lock. */
    PyObject *message = PyObject_CallFunctionObjArgs(capture->middleware->request_start,
                                                     args[0], capture->request_id, NULL);
    if (message == NULL) {
        return NULL;
    }
    PyObject *result = capture_send(capture, message);
    Py_DECREF(message);
    return result;
}

static int
capture_traverse(PyObject *self, visitproc visit, void *arg)
{
    Capture *capture = (Capture *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(capture->middleware);
    Py_VISIT(capture->scope);
    Py_VISIT(capture->send);
    Py_VISIT(capture->response);
    Py_VISIT(capture->status);
    Py_VISIT(capture->sent_object);
    Py_VISIT(capture->notes);
    Py_VISIT(capture->request_id);
    Py_VISIT(capture->held);
    Py_VISIT(capture->counting_receive);
    return 0;
}

static int
capture_clear(PyObject *self)
{
    Capture *capture = (Capture *)self;
    if (capture->held != NULL && capture->middleware != NULL) {
        /* Never handed over (a capture the collector frees): no longer waited for. */
        held_add(&capture->middleware->held, -1);
        Py_CLEAR(capture->held);
    }
    Py_CLEAR(capture->middleware);
    Py_CLEAR(capture->scope);
    Py_CLEAR(capture->send);
    Py_CLEAR(capture->response);
    Py_CLEAR(capture->status);
    Py_CLEAR(capture->sent_object);
    Py_CLEAR(capture->notes);
    Py_CLEAR(capture->request_id);
    Py_CLEAR(capture->held);
    Py_CLEAR(capture->counting_receive);
    return 0;
}

static void
capture_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    capture_clear(self);
    PyObject_GC_Del(self);
    Py_DECREF(type);
}

static PyMemberDef capture_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(Capture, vectorcall), Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot capture_slots[] = {
    {Py_tp_doc, "The send() an application gets: counts the response, then hands its "
                "record over with the last message."},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, capture_members},
    {Py_tp_traverse, capture_traverse},
    {Py_tp_clear, capture_clear},
    {Py_tp_dealloc, capture_dealloc},
    {0, NULL},
};

PyType_Spec capture_spec = {
    .name = "boundlog._speedups.Capture",
    .basicsize = sizeof(Capture),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
             | Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = capture_slots,
};
