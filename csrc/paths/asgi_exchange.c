/* The awaitable that runs one HTTP exchange: what the body of
 * asgi.AccessLogMiddleware.__call__ does for an "http" scope, as an object.
 *
 * An ``async def`` in C is an object that the awaiting coroutine drives: ``await``
 * asks it for an iterator (am_await: itself), then sends values in and throws
 * exceptions in, and it passes each on to the application's coroutine, as ``await``
 * inside a coroutine would (PEP 380's "yield from").  When the application ends
 * (returns, raises, or is closed) without the response having ended, the record is
 * made here, status 500 if no response started, and handed over; the exception, if
 * any, goes on unchanged.  A record held for a log that reads notes is handed over
 * then too.
 *
 * A queue with no room at that moment is the one case that may wait (policy
 * "wait"): the exchange then drives the middleware's Python coroutine
 * _submit_unfinished, which waits, hands over and raises the exception again. */
#include "paths/asgi.h"

#include "common/clock.h"
#include "common/compat.h"
#include "paths/app_attribute.h"

enum { FRESH, RUNNING_APP, SUBMITTING, DONE };

typedef struct {
    PyObject_HEAD
    Middleware *middleware;
    /* The call's arguments, until the exchange starts. */
    PyObject *scope;
    PyObject *receive;
    PyObject *send;
    Capture *capture; /* from the start on */
    PyObject *inner;  /* the iterator being driven: the application's, then the submitter */
    int state;
} Exchange;

PyObject *
exchange_new(Middleware *middleware, PyObject *scope, PyObject *receive, PyObject *send)
{
    Exchange *exchange = PyObject_GC_New(Exchange, middleware->exchange_type);
    if (exchange == NULL) {
        return NULL;
    }
    exchange->middleware = (Middleware *)Py_NewRef(middleware);
    exchange->scope = Py_NewRef(scope);
    exchange->receive = Py_NewRef(receive);
    exchange->send = Py_NewRef(send);
    exchange->capture = NULL;
    exchange->inner = NULL;
    exchange->state = FRESH;
    PyObject_GC_Track(exchange);
    return (PyObject *)exchange;
}

/* Whether `object` is a generator that ``await`` accepts as it is: one whose code
 * has CO_ITERABLE_COROUTINE (a ``@types.coroutine`` generator function, or an
 * old-style ``@asyncio.coroutine``).  Read through gi_code.co_flags, public
 * attributes, as inspect.isawaitable does: CPython's own test is private API.
 * 1, 0, or -1 with an exception set. */
static int
is_iterable_coroutine(PyObject *object)
{
    if (!PyGen_CheckExact(object)) {
        return 0;
    }
    PyObject *code = PyObject_GetAttrString(object, "gi_code");
    if (code == NULL) {
        return -1;
    }
    int is = PyCode_Check(code) && (((PyCodeObject *)code)->co_flags & CO_ITERABLE_COROUTINE);
    Py_DECREF(code);
    return is;
}

/* The iterator that ``await awaitable`` drives (what CPython's GET_AWAITABLE gives). */
static PyObject *
awaited_iterator(PyObject *awaitable)
{
    int is = PyCoro_CheckExact(awaitable) ? 1 : is_iterable_coroutine(awaitable);
    if (is != 0) {
        return is < 0 ? NULL : Py_NewRef(awaitable);
    }
    PyAsyncMethods *async = Py_TYPE(awaitable)->tp_as_async;
    if (async == NULL || async->am_await == NULL) {
        PyErr_Format(PyExc_TypeError, "'%.100s' object can't be awaited",
                     Py_TYPE(awaitable)->tp_name);
        return NULL;
    }
    PyObject *iterator = async->am_await(awaitable);
    if (iterator == NULL) {
        return NULL;
    }
    /* As CPython: __await__ must give an iterator, and not a coroutine of any kind. */
    is = PyCoro_CheckExact(iterator) ? 1 : is_iterable_coroutine(iterator);
    if (is > 0) {
        PyErr_SetString(PyExc_TypeError, "__await__() returned a coroutine");
    }
    else if (is == 0 && !PyIter_Check(iterator)) {
        PyErr_Format(PyExc_TypeError, "__await__() returned non-iterator of type '%.100s'",
                     Py_TYPE(iterator)->tp_name);
    }
    if (is != 0 || !PyIter_Check(iterator)) {
        Py_CLEAR(iterator);
    }
    return iterator;
}

/* The request's id, from the middleware's request_scope (_request_id.RequestIds): the
 * exchange's scope becomes the one the application and the record see, and
 * `*request_id` a new reference.  0, or -1 with an exception set. */
static int
request_scope(Exchange *exchange, PyObject **request_id)
{
    PyObject *pair = PyObject_CallOneArg(exchange->middleware->request_scope, exchange->scope);
    if (pair == NULL) {
        return -1;
    }
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
        Py_DECREF(pair);
        PyErr_SetString(PyExc_TypeError, "request_scope() must return (scope, request id)");
        return -1;
    }
    *request_id = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    Py_SETREF(exchange->scope, Py_NewRef(PyTuple_GET_ITEM(pair, 0)));
    Py_DECREF(pair);
    return 0;
}

/* Calls the application: 0, or -1 with its exception set. */
static int
start(Exchange *exchange)
{
    Middleware *middleware = exchange->middleware;
    double started = clock_seconds(CLOCK_PERF_COUNTER, middleware->perf_counter);
    if (PyErr_Occurred()) {
        return -1;
    }
    /* As the reference: the id is the scope's once the clock has started. */
    PyObject *request_id = NULL;
    int prepared = middleware->request_scope == Py_None ? 0
                   : request_scope(exchange, &request_id);
    exchange->capture = prepared < 0 ? NULL
                        : capture_new(middleware, exchange->scope, exchange->send, started);
    if (exchange->capture != NULL) {
        exchange->capture->request_id = request_id;
    }
    else {
        Py_XDECREF(request_id);
    }
    if (exchange->capture != NULL && middleware->notes != Py_None) {
        /* The request's notes, set in the context the application runs in (_notes). */
        PyObject *notes = PyDict_New();
        PyObject *token = notes == NULL ? NULL : PyContextVar_Set(middleware->notes, notes);
        if (token == NULL) {
            Py_XDECREF(notes);
            Py_CLEAR(exchange->capture);
        }
        else {
            Py_DECREF(token);
            exchange->capture->notes = notes;
        }
    }
    if (exchange->capture != NULL && middleware->counting_receive != Py_None) {
        /* A log that reads the request body's bytes: the application receives through
         * a wrapper that counts them, which the record reads (asgi_record.c). */
        PyObject *counting = PyObject_CallOneArg(middleware->counting_receive,
                                                 exchange->receive);
        if (counting == NULL) {
            Py_CLEAR(exchange->capture);
        }
        else {
            Py_SETREF(exchange->receive, counting);
            exchange->capture->counting_receive = Py_NewRef(counting);
        }
    }
    PyObject *app = exchange->capture == NULL ? NULL : app_attribute_read((PyObject *)middleware);
    PyObject *awaitable = NULL;
    if (app != NULL) {
        PyObject *args[] = {exchange->scope, exchange->receive, (PyObject *)exchange->capture};
        awaitable = PyObject_Vectorcall(app, args, 3, NULL);
        Py_DECREF(app);
    }
    Py_CLEAR(exchange->scope);
    Py_CLEAR(exchange->receive);
    Py_CLEAR(exchange->send);
    exchange->state = RUNNING_APP;
    if (awaitable == NULL) {
        return -1;
    }
    exchange->inner = awaited_iterator(awaitable);
    Py_DECREF(awaitable);
    return exchange->inner == NULL ? -1 : 0;
}

/* Raises `raised` with `context` (both stolen, either may be NULL) as its context, as
 * an exception raised in a finally block has the one it interrupted. */
static void
raise_in_context(PyObject *raised, PyObject *context)
{
    if (context != NULL) {
        PyException_SetContext(raised, context);
    }
    exception_restore(raised);
}

/* The record still to hand over once the application has ended, if any: that of a
 * response that did not end, or the one held for a log that reads notes (see
 * asgi_send.c), with the notes the request has now.  NULL with no exception set when
 * there is none. */
static PyObject *
pending_record(Capture *capture)
{
    PyObject *record = NULL;
    if (capture == NULL) {
        return NULL;
    }
    Py_BEGIN_CRITICAL_SECTION(capture);
    if (capture->held != NULL) {
        PyObject *held = capture->held;
        capture->held = NULL;
        held_add(&capture->middleware->held, -1);
        record = asgi_with_notes(capture, held);
        Py_DECREF(held);
    }
    else if (!capture->finished) {
        /* `status or 500`: no response had started, and the server answers 500. */
        int started = capture->status == NULL ? 0 : PyObject_IsTrue(capture->status);
        PyObject *status = started < 0 ? NULL
                           : started ? Py_NewRef(capture->status)
                                     : PyLong_FromLong(500);
        record = status == NULL ? NULL : asgi_record(capture, status, 0);
        Py_XDECREF(status);
    }
    Py_END_CRITICAL_SECTION();
    return record;
}

/* The application ended: `status` is how (PYGEN_RETURN, or PYGEN_ERROR with its
 * exception set).  Hands over the record still pending (pending_record). */
static PySendResult
app_ended(Exchange *exchange, PySendResult status, PyObject **result)
{
    Py_CLEAR(exchange->inner);
    exchange->state = DONE;
    PyObject *error = status == PYGEN_ERROR ? exception_take() : NULL;
    PyObject *record = pending_record(exchange->capture);
    int accepted = 1;
    if (record != NULL) {
        accepted = handoff_offer((Handoff *)exchange->middleware->handoff, record);
    }
    if (PyErr_Occurred()) {
        Py_XDECREF(record);
        raise_in_context(exception_take(), error);
        return PYGEN_ERROR;
    }
    if (!accepted) {
        PyObject *tail = PyObject_CallFunctionObjArgs(exchange->middleware->submit_unfinished,
                                                      record, error ? error : Py_None, NULL);
        Py_DECREF(record);
        Py_XDECREF(error);
        if (tail == NULL) {
            return PYGEN_ERROR;
        }
        exchange->inner = tail;
        exchange->state = SUBMITTING;
        PySendResult sent = PyIter_Send(tail, Py_None, result);
        if (sent != PYGEN_NEXT) {
            Py_CLEAR(exchange->inner);
            exchange->state = DONE;
        }
        return sent;
    }
    Py_XDECREF(record);
    if (error != NULL) {
        exception_restore(error);
        return PYGEN_ERROR;
    }
    *result = Py_NewRef(Py_None);
    return PYGEN_RETURN;
}

/* PyIter_Send on the inner iterator, held: the application may run code that blocks,
 * and a critical section does not keep another thread out meanwhile. */
static PySendResult
send_inner(Exchange *exchange, PyObject *value, PyObject **result)
{
    PyObject *inner = Py_NewRef(exchange->inner);
    PySendResult status = PyIter_Send(inner, value, result);
    Py_DECREF(inner);
    return status;
}

static PySendResult
exchange_send_result(PyObject *self, PyObject *value, PyObject **result)
{
    Exchange *exchange = (Exchange *)self;
    PySendResult status;
    *result = NULL;
    switch (exchange->state) {
    case FRESH:
        if (value != Py_None) {
            PyErr_SetString(PyExc_TypeError,
                            "can't send non-None value to a just-started coroutine");
            return PYGEN_ERROR;
        }
        if (start(exchange) < 0) {
            return app_ended(exchange, PYGEN_ERROR, result);
        }
        /* fall through */
    case RUNNING_APP:
        status = send_inner(exchange, value, result);
        if (status == PYGEN_NEXT) {
            return status;
        }
        /* The application's return value is not the middleware's. */
        Py_CLEAR(*result);
        return app_ended(exchange, status, result);
    case SUBMITTING:
        status = send_inner(exchange, value, result);
        if (status != PYGEN_NEXT) {
            Py_CLEAR(exchange->inner);
            exchange->state = DONE;
        }
        return status;
    default:
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        return PYGEN_ERROR;
    }
}

/* A send result as the method send() and throw() give it. */
static PyObject *
as_method_result(PySendResult status, PyObject *result)
{
    if (status == PYGEN_RETURN) {
        /* The exchange returns None, always. */
        Py_DECREF(result);
        PyErr_SetNone(PyExc_StopIteration);
        return NULL;
    }
    return result; /* yielded, or NULL on error */
}

static PySendResult
exchange_am_send(PyObject *self, PyObject *value, PyObject **result)
{
    PySendResult status;
    Py_BEGIN_CRITICAL_SECTION(self);
    status = exchange_send_result(self, value, result);
    Py_END_CRITICAL_SECTION();
    return status;
}

static PyObject *
exchange_iternext(PyObject *self)
{
    PyObject *result;
    PySendResult status = exchange_am_send(self, Py_None, &result);
    if (status == PYGEN_RETURN) {
        Py_DECREF(result); /* None: the end, without an exception */
        return NULL;
    }
    return result;
}

static PyObject *
exchange_send(PyObject *self, PyObject *value)
{
    PyObject *result;
    PySendResult status = exchange_am_send(self, value, &result);
    return as_method_result(status, result);
}

/* Raises what throw(*args) was given, as a coroutine with nothing to delegate to. */
static void
raise_thrown(PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *thrown = args[0];
    if (PyExceptionInstance_Check(thrown)) {
        PyErr_SetObject((PyObject *)Py_TYPE(thrown), thrown);
    }
    else if (PyExceptionClass_Check(thrown)) {
        PyErr_SetObject(thrown, nargs > 1 ? args[1] : NULL);
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "exceptions must be classes or instances deriving from BaseException, "
                     "not %.100s", Py_TYPE(thrown)->tp_name);
    }
}

/* inner.<name>(*args): the method's result, or NULL and *status saying how it ended. */
static PyObject *
call_inner(Exchange *exchange, const char *name, PyObject *const *args, Py_ssize_t nargs,
           PySendResult *status)
{
    PyObject *method = PyObject_GetAttrString(exchange->inner, name);
    PyObject *result = NULL;
    if (method == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            *status = PYGEN_ERROR;
            return NULL;
        }
        PyErr_Clear();
        /* An iterator without throw(): the exception is raised where it waits. */
        if (args != NULL) {
            raise_thrown(args, nargs);
            *status = PYGEN_ERROR;
        }
        else {
            *status = PYGEN_RETURN;
        }
        return NULL;
    }
    result = PyObject_Vectorcall(method, args, nargs, NULL);
    Py_DECREF(method);
    if (result != NULL) {
        *status = PYGEN_NEXT;
        return result;
    }
    if (PyErr_ExceptionMatches(PyExc_StopIteration)) {
        PyErr_Clear();
        *status = PYGEN_RETURN;
    }
    else {
        *status = PYGEN_ERROR;
    }
    return NULL;
}

static PyObject *
exchange_throw_locked(Exchange *exchange, PyObject *const *args, Py_ssize_t nargs)
{
    PySendResult status;
    PyObject *result = NULL;
    switch (exchange->state) {
    case RUNNING_APP:
    case SUBMITTING:
        result = call_inner(exchange, "throw", args, nargs, &status);
        if (status == PYGEN_NEXT) {
            return result;
        }
        if (exchange->state == RUNNING_APP) {
            status = app_ended(exchange, status, &result);
        }
        else {
            Py_CLEAR(exchange->inner);
            exchange->state = DONE;
            if (status == PYGEN_RETURN) {
                result = Py_NewRef(Py_None);
            }
        }
        return as_method_result(status, result);
    default:
        /* Not started (it never will be) or over: the exception is raised here. */
        Py_CLEAR(exchange->scope);
        Py_CLEAR(exchange->receive);
        Py_CLEAR(exchange->send);
        int fresh = exchange->state == FRESH;
        exchange->state = DONE;
        raise_thrown(args, nargs);
#if PY_VERSION_HEX < 0x030C0000
        if (fresh && PyErr_ExceptionMatches(PyExc_StopIteration)) {
            /* As a coroutine that has not started on 3.11: the exception is raised in
             * its body, where StopIteration becomes RuntimeError (PEP 479).  From 3.12
             * on it is raised before the body, unchanged, as here. */
            PyObject *stop = exception_take();
            PyErr_SetString(PyExc_RuntimeError, "coroutine raised StopIteration");
            PyObject *error = exception_take();
            PyException_SetContext(error, Py_NewRef(stop));
            PyException_SetCause(error, stop);
            exception_restore(error);
        }
#else
        (void)fresh;
#endif
        return NULL;
    }
}

static PyObject *
exchange_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "throw() takes 1 to 3 arguments");
        return NULL;
    }
    PyObject *result;
    Py_BEGIN_CRITICAL_SECTION(self);
    result = exchange_throw_locked((Exchange *)self, args, nargs);
    Py_END_CRITICAL_SECTION();
    return result;
}

/* close(): the application is closed, and the record still pending (pending_record)
 * is handed over without waiting, since a closed coroutine cannot wait (under "wait"
 * with a full queue it is counted as refused). */
static PyObject *
exchange_close_locked(Exchange *exchange)
{
    int state = exchange->state;
    exchange->state = DONE;
    Py_CLEAR(exchange->scope);
    Py_CLEAR(exchange->receive);
    Py_CLEAR(exchange->send);
    if (state != RUNNING_APP && state != SUBMITTING) {
        Py_RETURN_NONE;
    }
    PySendResult status;
    PyObject *result = call_inner(exchange, "close", NULL, 0, &status);
    Py_CLEAR(exchange->inner);
    Py_XDECREF(result);
    PyObject *error = status == PYGEN_ERROR ? exception_take() : NULL;
    if (state == RUNNING_APP) {
        PyObject *record = pending_record(exchange->capture);
        if (record != NULL) {
            result = PyObject_CallOneArg(exchange->middleware->submit_on_close, record);
            Py_XDECREF(result);
            Py_DECREF(record);
        }
        if (PyErr_Occurred()) {
            raise_in_context(exception_take(), error);
            return NULL;
        }
    }
    if (error != NULL) {
        exception_restore(error);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
exchange_close(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *result;
    Py_BEGIN_CRITICAL_SECTION(self);
    result = exchange_close_locked((Exchange *)self);
    Py_END_CRITICAL_SECTION();
    return result;
}

static int
exchange_traverse(PyObject *self, visitproc visit, void *arg)
{
    Exchange *exchange = (Exchange *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(exchange->middleware);
    Py_VISIT(exchange->scope);
    Py_VISIT(exchange->receive);
    Py_VISIT(exchange->send);
    Py_VISIT(exchange->capture);
    Py_VISIT(exchange->inner);
    return 0;
}

static int
exchange_clear(PyObject *self)
{
    Exchange *exchange = (Exchange *)self;
    Py_CLEAR(exchange->middleware);
    Py_CLEAR(exchange->scope);
    Py_CLEAR(exchange->receive);
    Py_CLEAR(exchange->send);
    Py_CLEAR(exchange->capture);
    Py_CLEAR(exchange->inner);
    return 0;
}

/* An exchange dropped before it ended (a server that forgets a suspended request) is
 * closed, as a coroutine is: the record of its response is handed over, not lost. */
static void
exchange_finalize(PyObject *self)
{
    Exchange *exchange = (Exchange *)self;
    if (exchange->state != RUNNING_APP && exchange->state != SUBMITTING) {
        return;
    }
    PyObject *pending = exception_take();
    PyObject *result = exchange_close(self, NULL);
    if (result == NULL) {
        PyErr_WriteUnraisable(self);
    }
    Py_XDECREF(result);
    if (pending != NULL) {
        exception_restore(pending);
    }
}

static void
exchange_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (PyObject_CallFinalizerFromDealloc(self) < 0) {
        return; /* resurrected */
    }
    PyObject_GC_UnTrack(self);
    exchange_clear(self);
    PyObject_GC_Del(self);
    Py_DECREF(type);
}

static PyMethodDef exchange_methods[] = {
    {"send", exchange_send, METH_O, "Sends a value into the application."},
    {"throw", (PyCFunction)(void (*)(void))exchange_throw, METH_FASTCALL,
     "Raises an exception in the application."},
    {"close", exchange_close, METH_NOARGS, "Closes the application."},
    {NULL, NULL, 0, NULL},
};

static PyObject *
exchange_await(PyObject *self)
{
    return Py_NewRef(self);
}

static PyType_Slot exchange_slots[] = {
    {Py_tp_doc, "One HTTP exchange through the middleware: an awaitable."},
    {Py_am_await, exchange_await},
    {Py_am_send, exchange_am_send},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, exchange_iternext},
    {Py_tp_methods, exchange_methods},
    {Py_tp_traverse, exchange_traverse},
    {Py_tp_clear, exchange_clear},
    {Py_tp_finalize, exchange_finalize},
    {Py_tp_dealloc, exchange_dealloc},
    {0, NULL},
};

PyType_Spec exchange_spec = {
    .name = "boundlog._speedups.Exchange",
    .basicsize = sizeof(Exchange),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = exchange_slots,
};
