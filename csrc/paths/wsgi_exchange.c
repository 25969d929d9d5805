/* One WSGI request: what wsgi._Exchange does, for the compiled middleware.
 *
 * The server gets the Exchange as the response iterable.  Iterating it counts the
 * body's bytes (a list or tuple all at once, when the server starts on it; any other
 * body chunk by chunk, through a Body iterator that behaves as the reference's
 * generator: it calls iter() on the body at its first step and ends for good at the
 * first exception).  The record is handed over once: when the server asks past the
 * body's last chunk (it wrote the whole body), else by close(), which closes the body
 * and then, whatever that did, hands it over: to the queue, or to log.submit (the
 * policy) when the queue has no room.  A response the server drops, neither exhausted
 * nor closed, is logged by the finalizer, which never waits (middleware
 * _submit_unclosed).
 *
 * An Exchange is one request's, but an application may hand its start_response or
 * write to another thread: each field is read and changed under a critical section
 * on the Exchange (nothing on the GIL build), and no call into Python is made inside
 * one. */
#include "paths/wsgi.h"

#include "common/clock.h"
#include "common/compat.h"
#include "paths/app_attribute.h"
#include "paths/environ.h"
#include "paths/handoff.h"
#include "module_state.h"
#include "record/budget.h"
#include "record/extras.h"

typedef struct {
    PyObject_HEAD
    WsgiMiddleware *middleware;
    PyObject *environ;
    PyObject *start_response;   /* the server's */
    PyObject *server_write;     /* what the server's start_response returned, or NULL */
    PyObject *status;           /* the status code (an int); 500 until start_response */
    PyObject *response_headers; /* kept when the log reads them, else NULL: () */
    PyObject *body;             /* the application's iterable; NULL until it returns */
    PyObject *notes;            /* the request's notes (a dict) when the log reads them */
    PyObject *notes_token;      /* what setting them returned, until close() resets them */
    PyObject *trace;            /* the span's ids as the application was called, or NULL */
    PyObject *input;            /* the counting wsgi.input (counting_input), or NULL */
    Py_ssize_t sent;
    double started; /* perf_counter() when the request came in */
    int closed;
    int logged;    /* the record was handed over (or the exchange is not whole yet) */
    int completed; /* the server asked past the body's last chunk (counts_chunks) */
} Exchange;

/* A body that is not a list or tuple, counted as the server takes it. */
typedef struct {
    PyObject_HEAD
    PyObject *exchange;
    PyObject *body;     /* until the first step calls iter() on it */
    PyObject *iterator; /* from then until it ends */
    int counts;         /* adds each chunk's size: 0 for a list or tuple counted whole */
    int taken;          /* the server took a chunk (it sent the headers with it) */
} Body;

static void
add_sent(Exchange *exchange, Py_ssize_t size)
{
    Py_BEGIN_CRITICAL_SECTION(exchange);
    exchange->sent = size > PY_SSIZE_T_MAX - exchange->sent ? PY_SSIZE_T_MAX
                                                            : exchange->sent + size;
    Py_END_CRITICAL_SECTION();
}

static void failed_before_a_chunk(Exchange *exchange);

/* The code of `status`: the table's for a standard status line, else wsgi._status_code's. */
static PyObject *
status_code(WsgiMiddleware *middleware, PyObject *status)
{
    if (PyUnicode_CheckExact(status)) {
        PyObject *code;
        int found = PyDict_GetItemRef(middleware->status_codes, status, &code);
        if (found != 0) {
            return code; /* NULL if the lookup raised */
        }
    }
    return PyObject_CallOneArg(middleware->status_code, status);
}

/* write(data), what start_response returns: counts, then calls the server's write. */
static PyObject *
exchange_write(PyObject *self, PyObject *data)
{
    Exchange *exchange = (Exchange *)self;
    Py_ssize_t size = PyObject_Length(data);
    if (size < 0) {
        return NULL;
    }
    add_sent(exchange, size);
    PyObject *write;
    Py_BEGIN_CRITICAL_SECTION(self);
    write = Py_XNewRef(exchange->server_write);
    Py_END_CRITICAL_SECTION();
    if (write == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "write() of a request that is gone");
        return NULL;
    }
    PyObject *result = PyObject_CallOneArg(write, data);
    Py_DECREF(write);
    return result;
}

static PyMethodDef write_method = {
    "write", exchange_write, METH_O, "Counts data, then has the server write it."};

/* start_response's arguments, (status, headers, exc_info=None), by position or by
 * keyword: 0, or -1 with TypeError set. */
static int
start_response_arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         PyObject **values)
{
    static const char *const names[] = {"status", "headers", "exc_info"};
    Py_ssize_t given = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError, "start_response() takes from 2 to 3 positional "
                                      "arguments but %zd were given", nargs);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        values[i] = i < nargs ? args[i] : NULL;
    }
    for (Py_ssize_t k = 0; k < given; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < 3 && PyUnicode_CompareWithASCIIString(name, names[i]) != 0) {
            i++;
        }
        if (i == 3 || values[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "start_response() got an unexpected or repeated "
                                          "keyword argument %R", name);
            return -1;
        }
        values[i] = args[nargs + k];
    }
    if (values[0] == NULL || values[1] == NULL) {
        PyErr_SetString(PyExc_TypeError, "start_response() missing a required argument: "
                                         "'status' and 'headers' are required");
        return -1;
    }
    if (values[2] == NULL) {
        values[2] = Py_None;
    }
    return 0;
}

/* start_response(status, headers, exc_info=None), what the application gets. */
static PyObject *
exchange_start_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    PyObject *values[3];
    if (start_response_arguments(args, nargs, kwnames, values) < 0) {
        return NULL;
    }
    PyObject *status = values[0], *headers = values[1], *exc_info = values[2];
    Exchange *exchange = (Exchange *)self;
    PyObject *code = status_code(exchange->middleware, status);
    if (code == NULL) {
        return NULL;
    }
    int keeps_headers = exchange->middleware->keeps_response_headers == Py_True;
    Py_BEGIN_CRITICAL_SECTION(self);
    Py_XSETREF(exchange->status, code);
    if (keeps_headers) {
        Py_XSETREF(exchange->response_headers, Py_NewRef(headers));
    }
    Py_END_CRITICAL_SECTION();
    int reraising = PyObject_IsTrue(exc_info);
    if (reraising < 0) {
        return NULL;
    }
    PyObject *call_args[3] = {status, headers, exc_info};
    PyObject *write = PyObject_Vectorcall(exchange->start_response, call_args, 2 + reraising, NULL);
    if (write == NULL) {
        return NULL;
    }
    Py_BEGIN_CRITICAL_SECTION(self);
    Py_XSETREF(exchange->server_write, write);
    Py_END_CRITICAL_SECTION();
    return PyCFunction_NewEx(&write_method, self, NULL);
}

static PyMethodDef start_response_method = {
    "start_response", (PyCFunction)(void (*)(void))exchange_start_response,
    METH_FASTCALL | METH_KEYWORDS, "The application's start_response."};

/* The header fields the log reads, in a dict of their own, as wsgi._header_picker
 * makes it: a queued record must not keep the server's environ alive. */
static PyObject *
picked_fields(WsgiMiddleware *middleware, PyObject *environ)
{
    PyObject *keys = middleware->picked_keys;
    if (keys == Py_None) {
        return Py_NewRef(environ);
    }
    PyObject *picked = PyDict_New();
    for (Py_ssize_t i = 0; picked != NULL && i < PyTuple_GET_SIZE(keys); i++) {
        PyObject *key = PyTuple_GET_ITEM(keys, i);
        PyObject *value = NULL;
        if (PyDict_CheckExact(environ)) {
            if (PyDict_GetItemRef(environ, key, &value) == 0) {
                value = Py_NewRef(Py_None);
            }
        }
        else {
            value = PyObject_CallMethod(environ, "get", "O", key);
        }
        if (value == NULL || PyDict_SetItem(picked, key, value) < 0) {
            Py_CLEAR(picked);
        }
        Py_XDECREF(value);
    }
    return picked;
}

/* The request's notes bounded in C (record/budget.h), for a record of picked fields:
 * the environ's PATH_INFO and QUERY_STRING (empty when absent, as the reference reads
 * them) and the picked `headers` are what the notes' room is measured against.  1 with
 * *bounded, 0 to leave them to the reference, -1 on error. */
static int
usual_notes(Exchange *exchange, PyObject *headers, PyObject **bounded)
{
    WsgiMiddleware *middleware = exchange->middleware;
    /* The variables' names, interned in the module's state (environ.c). */
    PyObject **names = ((ModuleState *)PyModule_GetState(middleware->module))->environ_names;
    PyObject *variables[2] = {names[PATH_INFO], names[QUERY_STRING]};
    PyObject *values[2] = {NULL, NULL};
    int rc = 0;
    for (int i = 0; rc == 0 && i < 2; i++) {
        if (PyDict_GetItemRef(exchange->environ, variables[i], &values[i]) < 0) {
            rc = -1;
        }
        else if (values[i] == NULL) {
            values[i] = PyUnicode_FromString("");
            rc = values[i] == NULL ? -1 : 0;
        }
    }
    Py_ssize_t used;
    if (rc == 0 && budget_used(values[0], values[1], headers, middleware->limit, &used)) {
        rc = budget_notes(exchange->notes, middleware->limit, used, bounded);
    }
    Py_XDECREF(values[0]);
    Py_XDECREF(values[1]);
    return rc;
}

/* RecordBudget.notes(notes, path, query, headers), as wsgi._Exchange._record calls it:
 * the request's notes copied and cut to what the record's path, query and header
 * fields leave of the budget (a whole environ holds its path and query among its text
 * values); None when there are none.  In C for the usual notes of a record of picked
 * fields, a call into Python for the others. */
static PyObject *
bounded_notes(Exchange *exchange, PyObject *headers)
{
    if (exchange->notes == NULL || PyDict_Size(exchange->notes) == 0) {
        return Py_NewRef(Py_None);
    }
    WsgiMiddleware *middleware = exchange->middleware;
    if (middleware->limit >= 0 && PyDict_CheckExact(exchange->environ)) {
        /* The usual notes of a record of picked fields, in C (record/budget.h). */
        PyObject *bounded = NULL;
        int rc = usual_notes(exchange, headers, &bounded);
        if (rc != 0) {
            return rc < 0 ? NULL : bounded;
        }
    }
    PyObject *empty = PyUnicode_FromString("");
    PyObject *path = NULL, *query = NULL;
    if (empty != NULL && middleware->limit < 0) {
        path = Py_NewRef(empty);
        query = Py_NewRef(empty);
    }
    else if (empty != NULL) {
        PyObject *environ = Py_NewRef(exchange->environ); /* held: .get() may run code */
        path = PyObject_CallMethod(environ, "get", "sO", "PATH_INFO", empty);
        query = path == NULL ? NULL
                : PyObject_CallMethod(environ, "get", "sO", "QUERY_STRING", empty);
        Py_DECREF(environ);
    }
    PyObject *budget = query == NULL ? NULL
                       : PyObject_GetAttrString(middleware->bound, "__self__");
    PyObject *bounded = NULL;
    if (budget != NULL) {
        PyObject *notes = Py_NewRef(exchange->notes); /* held: the call may run code */
        bounded = PyObject_CallMethod(budget, "notes", "OOOO", notes, path, query, headers);
        Py_DECREF(notes);
        Py_DECREF(budget);
    }
    Py_XDECREF(path);
    Py_XDECREF(query);
    Py_XDECREF(empty);
    return bounded;
}

/* The record of the exchange, as _Exchange._record makes it; NULL on error. */
static PyObject *
exchange_record(Exchange *exchange)
{
    WsgiMiddleware *middleware = exchange->middleware;
    PyObject *headers = picked_fields(middleware, exchange->environ);
    if (headers == NULL) {
        return NULL;
    }
    double duration = clock_seconds(CLOCK_PERF_COUNTER, middleware->perf_counter)
                      - exchange->started;
    double now = clock_seconds(CLOCK_WALL, middleware->wall_clock);
    PyObject *status, *response_headers;
    Py_ssize_t sent;
    int completed;
    Py_BEGIN_CRITICAL_SECTION(exchange);
    status = Py_NewRef(exchange->status);
    response_headers = exchange->response_headers != NULL
                       ? Py_NewRef(exchange->response_headers) : PyTuple_New(0);
    sent = exchange->sent;
    completed = exchange->completed;
    Py_END_CRITICAL_SECTION();
    PyObject *received = PyErr_Occurred() ? NULL : PyFloat_FromDouble(now - duration);
    PyObject *elapsed = PyFloat_FromDouble(duration);
    PyObject *sent_object = PyLong_FromSsize_t(sent);
    PyObject *limit = PyLong_FromSsize_t(middleware->limit);
    /* A copy of the request's notes cut to the budget's rest, None when there are none. */
    PyObject *notes = bounded_notes(exchange, headers);
    /* What the log's extras function learns from the environ (wsgi._Exchange._record):
     * the application has run, and left there what it knows.  Called only when nothing
     * above failed: Python code must not run with an exception set. */
    PyObject *extras = NULL;
    if (received != NULL && elapsed != NULL && sent_object != NULL && limit != NULL
        && response_headers != NULL && notes != NULL) {
        PyObject *learn_args[] = {exchange->environ, completed ? Py_True : Py_False,
                                  exchange->trace != NULL ? exchange->trace : Py_None};
        extras = middleware->extras == Py_None
                 ? Py_NewRef(Py_None)
                 : PyObject_Vectorcall(middleware->extras, learn_args, 3, NULL);
    }
    if (extras != NULL && exchange->input != NULL) {
        /* With what the application read of wsgi.input (wsgi._LearningExchange). */
        PyObject *bytes_read = PyObject_GetAttr(exchange->input, middleware->bytes_read_name);
        PyObject *counted = bytes_read == NULL ? NULL
                            : extras_with_bytes_received(middleware->no_extras, extras,
                                                         bytes_read);
        Py_XDECREF(bytes_read);
        Py_SETREF(extras, counted);
    }
    PyObject *record = NULL;
    if (extras != NULL) {
        PyObject *args[12] = {middleware->record_type, exchange->environ, received, elapsed,
                              status, sent_object, headers, response_headers,
                              middleware->bound, limit, notes, extras};
        record = environ_record(middleware->module, args, 12);
        if (record == Py_None) {
            /* An environ environ.c does not read: the reference makes the record. */
            Py_DECREF(record);
            PyObject *python_args[10] = {exchange->environ, received, elapsed, status,
                                         sent_object, headers, response_headers,
                                         middleware->bound, notes, extras};
            record = PyObject_Vectorcall(middleware->python_record, python_args, 10, NULL);
        }
    }
    Py_XDECREF(extras);
    Py_XDECREF(notes);
    Py_DECREF(headers);
    Py_DECREF(status);
    Py_XDECREF(response_headers);
    Py_XDECREF(received);
    Py_XDECREF(elapsed);
    Py_XDECREF(sent_object);
    Py_XDECREF(limit);
    return record;
}

/* Hands the record over as log.submit would: 0, or -1 on error. */
static int
submit_record(Exchange *exchange)
{
    WsgiMiddleware *middleware = exchange->middleware;
    PyObject *record = exchange_record(exchange);
    if (record == NULL) {
        return -1;
    }
    int rc = handoff_submit((Handoff *)middleware->handoff, middleware->submit, record);
    Py_DECREF(record);
    return rc;
}

/* Raises `error` (taken with exception_take) again, or, if another exception is
 * being raised meanwhile, that one with `error` as its context: what Python does
 * for an exception raised in a finally block. */
static void
raise_after(PyObject *error)
{
    if (error == NULL) {
        return;
    }
    PyObject *later = exception_take();
    if (later == NULL) {
        exception_restore(error);
        return;
    }
    PyException_SetContext(later, error); /* steals error */
    exception_restore(later);
}

/* The thread's context goes back to what it held before the request (wsgi._Exchange.
 * close): a thread serves request after request in one context.  A close() from
 * another context (another thread) leaves it, as the reference does. */
static void
forget_notes(Exchange *exchange)
{
    PyObject *token;
    Py_BEGIN_CRITICAL_SECTION(exchange);
    token = exchange->notes_token;
    exchange->notes_token = NULL;
    Py_END_CRITICAL_SECTION();
    if (token != NULL) {
        if (PyContextVar_Reset(exchange->middleware->notes, token) < 0) {
            PyErr_Clear();
        }
        Py_DECREF(token);
    }
}

/* Whether the record is still to be handed over, marking it handed over. */
static int
take_logging(Exchange *exchange)
{
    int already;
    Py_BEGIN_CRITICAL_SECTION(exchange);
    already = exchange->logged;
    exchange->logged = 1;
    Py_END_CRITICAL_SECTION();
    return !already;
}

/* The server asked past the last chunk (wsgi._Exchange._exhausted): it wrote the whole
 * body, so the record made now is accurate, and a server that never calls close()
 * still logs it.  0, or -1 with an exception set. */
static int
exchange_exhausted(Exchange *exchange)
{
    Py_BEGIN_CRITICAL_SECTION(exchange);
    exchange->completed = 1;
    Py_END_CRITICAL_SECTION();
    if (!take_logging(exchange)) {
        return 0;
    }
    forget_notes(exchange);
    return submit_record(exchange);
}

/* close(): closes the body, then hands the record over unless the end of the body
 * did; once. */
static PyObject *
exchange_close(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    Exchange *exchange = (Exchange *)self;
    int already;
    PyObject *body;
    Py_BEGIN_CRITICAL_SECTION(self);
    already = exchange->closed;
    exchange->closed = 1;
    body = Py_XNewRef(exchange->body);
    Py_END_CRITICAL_SECTION();
    if (already) {
        Py_XDECREF(body);
        Py_RETURN_NONE;
    }
    PyObject *error = NULL;
    if (body != NULL) {
        /* getattr(body, "close", None) */
        PyObject *close;
        PyObject_GetOptionalAttr(body, exchange->middleware->close_name, &close);
        PyObject *closed = close == NULL ? NULL : PyObject_CallNoArgs(close);
        Py_XDECREF(close);
        Py_XDECREF(closed);
        error = exception_take();
        Py_DECREF(body);
    }
    forget_notes(exchange);
    if ((take_logging(exchange) && submit_record(exchange) < 0) || error != NULL) {
        raise_after(error);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* For a log that reads bytes_received: the environ's wsgi.input, if it has one, becomes
 * a counting reader before the application runs (wsgi._LearningExchange), which the
 * exchange keeps to read its count.  0, or -1 with an exception set. */
static int
counting_input(Exchange *exchange)
{
    WsgiMiddleware *middleware = exchange->middleware;
    PyObject *environ = exchange->environ;
    int present = PySequence_Contains(environ, middleware->input_name);
    if (present <= 0) {
        return present;
    }
    PyObject *stream = PyObject_GetItem(environ, middleware->input_name);
    PyObject *input = stream == NULL ? NULL
                      : PyObject_CallOneArg(middleware->counting_input, stream);
    Py_XDECREF(stream);
    if (input == NULL || PyObject_SetItem(environ, middleware->input_name, input) < 0) {
        Py_XDECREF(input);
        return -1;
    }
    exchange->input = input;
    return 0;
}

PyObject *
wsgi_exchange_run(WsgiMiddleware *middleware, PyObject *environ, PyObject *start_response)
{
    double started = clock_seconds(CLOCK_PERF_COUNTER, middleware->perf_counter);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *status = PyLong_FromLong(500);
    if (status == NULL) {
        return NULL;
    }
    Exchange *exchange = PyObject_GC_New(Exchange, middleware->exchange_type);
    if (exchange == NULL) {
        Py_DECREF(status);
        return NULL;
    }
    exchange->middleware = (WsgiMiddleware *)Py_NewRef(middleware);
    exchange->environ = Py_NewRef(environ);
    exchange->start_response = Py_NewRef(start_response);
    exchange->server_write = NULL;
    exchange->status = status;
    exchange->response_headers = NULL;
    exchange->body = NULL;
    exchange->notes = NULL;
    exchange->notes_token = NULL;
    exchange->trace = NULL;
    exchange->input = NULL;
    exchange->sent = 0;
    exchange->started = started;
    exchange->closed = 0;
    exchange->logged = 1; /* nothing to log until the exchange is whole (the finalizer) */
    exchange->completed = 0;
    PyObject_GC_Track(exchange);
    PyObject *self = (PyObject *)exchange;
    if (middleware->notes != Py_None) {
        /* The request's notes, set in its thread's context before the application
         * runs (_notes, wsgi._Exchange.__init__). */
        exchange->notes = PyDict_New();
        PyObject *token = exchange->notes == NULL ? NULL
                          : PyContextVar_Set(middleware->notes, exchange->notes);
        if (token == NULL) {
            Py_DECREF(self);
            return NULL;
        }
        exchange->notes_token = token;
    }
    exchange->logged = 0;
    if (middleware->counting_input != Py_None && counting_input(exchange) < 0) {
        Py_DECREF(self);
        return NULL;
    }

    PyObject *app = app_attribute_read((PyObject *)middleware);
    if (app != NULL && middleware->trace != Py_None) {
        /* The span current now, inside OpenTelemetry's middleware (wsgi._Exchange):
         * its context has ended by the time the server closes the body.  What the
         * reader raises is the application's error below (it returns None for any
         * Exception itself). */
        exchange->trace = PyObject_CallNoArgs(middleware->trace);
        if (exchange->trace == NULL) {
            Py_CLEAR(app);
        }
    }
    PyObject *respond = app == NULL ? NULL : PyCFunction_NewEx(&start_response_method, self, NULL);
    if (respond != NULL && middleware->request_ids != Py_None) {
        /* The request's id, in the environ and the response's headers, as the reference
         * gives it: the application's start_response calls the exchange's. */
        Py_SETREF(respond, PyObject_CallFunctionObjArgs(middleware->request_ids, environ,
                                                        respond, NULL));
    }
    PyObject *body = NULL;
    if (respond != NULL) {
        PyObject *args[2] = {environ, respond};
        body = PyObject_Vectorcall(app, args, 2, NULL);
    }
    Py_XDECREF(app);
    Py_XDECREF(respond);
    if (body == NULL) {
        /* The reference's `except BaseException: exchange.close(); raise`. */
        failed_before_a_chunk(exchange);
        PyObject *error = exception_take();
        PyObject *closed = exchange_close(self, NULL);
        Py_XDECREF(closed);
        raise_after(error);
        Py_DECREF(self);
        return NULL;
    }
    Py_BEGIN_CRITICAL_SECTION(self);
    Py_XSETREF(exchange->body, body);
    Py_END_CRITICAL_SECTION();
    return self;
}

/* iter(exchange): a Body that sees the end of the body.  A list or tuple is counted
 * whole now (so that a server stopping halfway logs it all), unless the log reads
 * whether the server asked past its end; anything else chunk by chunk. */
static PyObject *
exchange_iter(PyObject *self)
{
    Exchange *exchange = (Exchange *)self;
    PyObject *body;
    Py_BEGIN_CRITICAL_SECTION(self);
    body = Py_XNewRef(exchange->body);
    Py_END_CRITICAL_SECTION();
    if (body == NULL) {
        body = PyTuple_New(0);
        if (body == NULL) {
            return NULL;
        }
    }
    PyObject *iterator = NULL;
    int counts = 1;
    if ((PyList_CheckExact(body) || PyTuple_CheckExact(body))
        && !exchange->middleware->counts_chunks) {
        Py_ssize_t total = 0;
        PyObject *chunk;
        for (Py_ssize_t i = 0; total >= 0 && (chunk = sequence_item_ref(body, i)) != NULL; i++) {
            Py_ssize_t size = PyObject_Length(chunk);
            Py_DECREF(chunk);
            total = size < 0 ? -1 : size > PY_SSIZE_T_MAX - total ? PY_SSIZE_T_MAX : total + size;
        }
        if (total < 0) {
            Py_DECREF(body);
            return NULL;
        }
        add_sent(exchange, total);
        counts = 0;
        /* As the reference's iter(body) now: the list's own iterator, stepped below. */
        Py_SETREF(body, PyObject_GetIter(body));
        if (body == NULL) {
            return NULL;
        }
    }
    Body *counting = PyObject_GC_New(Body, exchange->middleware->body_type);
    if (counting != NULL) {
        counting->exchange = Py_NewRef(self);
        counting->body = Py_NewRef(body);
        counting->iterator = NULL;
        counting->counts = counts;
        counting->taken = 0;
        PyObject_GC_Track(counting);
    }
    iterator = (PyObject *)counting;
    Py_DECREF(body);
    return iterator;
}

/* The application or its body raised before the server took a chunk, and write() sent
 * no byte: the server has sent no header either (gunicorn, waitress and wsgiref send
 * them with the first chunk, even an empty one), and answers 500 in place of the status
 * the application gave, as wsgi._Exchange._failed_unsent records it.  Called with the
 * exception set; leaves it so. */
static void
failed_before_a_chunk(Exchange *exchange)
{
    PyObject *error = exception_take();
    if (error == NULL) {
        return;
    }
    PyObject *code = PyLong_FromLong(500);
    if (code == NULL) {
        /* No memory for 500: the status the application gave stays, and the body's
         * exception is the one the server sees. */
        PyErr_Clear();
    }
    else {
        Py_BEGIN_CRITICAL_SECTION(exchange);
        if (exchange->sent == 0) {
            Py_SETREF(exchange->status, code);
            code = NULL;
        }
        Py_END_CRITICAL_SECTION();
        Py_XDECREF(code);
    }
    exception_restore(error);
}

/* The next chunk, counted; the end (NULL, with or without an exception) for good. */
static PyObject *
body_next(PyObject *self)
{
    Body *counting = (Body *)self;
    PyObject *iterator, *body;
    Py_BEGIN_CRITICAL_SECTION(self);
    iterator = Py_XNewRef(counting->iterator);
    body = counting->body; /* taken over: only the first step sees it */
    counting->body = NULL;
    Py_END_CRITICAL_SECTION();
    if (body != NULL) {
        iterator = PyObject_GetIter(body);
        Py_DECREF(body);
        if (iterator == NULL) {
            failed_before_a_chunk((Exchange *)counting->exchange); /* no body at all */
            return NULL;
        }
        Py_BEGIN_CRITICAL_SECTION(self);
        Py_XSETREF(counting->iterator, Py_NewRef(iterator));
        Py_END_CRITICAL_SECTION();
    }
    if (iterator == NULL) {
        return NULL; /* ended */
    }
    PyObject *chunk = PyIter_Next(iterator);
    Py_DECREF(iterator);
    Py_ssize_t size = chunk == NULL ? -1 : PyObject_Length(chunk);
    if (size < 0) {
        /* The end, or an exception: the reference's generator is finished either way;
         * the end without one means the whole body went (_LearningExchange). */
        int ended = chunk == NULL && !PyErr_Occurred();
        int taken;
        Py_XDECREF(chunk);
        Py_BEGIN_CRITICAL_SECTION(self);
        Py_CLEAR(counting->iterator);
        taken = counting->taken;
        Py_END_CRITICAL_SECTION();
        if (ended) {
            exchange_exhausted((Exchange *)counting->exchange);
        }
        else if (!taken) {
            failed_before_a_chunk((Exchange *)counting->exchange);
        }
        return NULL;
    }
    if (counting->counts) {
        add_sent((Exchange *)counting->exchange, size);
    }
    Py_BEGIN_CRITICAL_SECTION(self);
    counting->taken = 1;
    Py_END_CRITICAL_SECTION();
    return chunk;
}

static int
exchange_traverse(PyObject *self, visitproc visit, void *arg)
{
    Exchange *exchange = (Exchange *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(exchange->middleware);
    Py_VISIT(exchange->environ);
    Py_VISIT(exchange->start_response);
    Py_VISIT(exchange->server_write);
    Py_VISIT(exchange->status);
    Py_VISIT(exchange->response_headers);
    Py_VISIT(exchange->body);
    Py_VISIT(exchange->notes);
    Py_VISIT(exchange->notes_token);
    Py_VISIT(exchange->trace);
    Py_VISIT(exchange->input);
    return 0;
}

static int
exchange_clear(PyObject *self)
{
    Exchange *exchange = (Exchange *)self;
    Py_CLEAR(exchange->middleware);
    Py_CLEAR(exchange->environ);
    Py_CLEAR(exchange->start_response);
    Py_CLEAR(exchange->server_write);
    Py_CLEAR(exchange->status);
    Py_CLEAR(exchange->response_headers);
    Py_CLEAR(exchange->body);
    Py_CLEAR(exchange->notes);
    Py_CLEAR(exchange->notes_token);
    Py_CLEAR(exchange->trace);
    Py_CLEAR(exchange->input);
    return 0;
}

/* A response the server dropped, neither exhausted nor closed (wsgi._Exchange.__del__):
 * still logged, never lost uncounted.  The finalizer may run on any thread, at any
 * allocation: the body's close() (application code) is not called, and the record is
 * offered without waiting for room (middleware._submit_unclosed).  What goes wrong is
 * reported as unraisable, as a Python __del__'s exception is. */
static void
exchange_finalize(PyObject *self)
{
    Exchange *exchange = (Exchange *)self;
    if (exchange->middleware == NULL || !take_logging(exchange)) {
        return;
    }
    PyObject *raised = exception_take();
    PyObject *record = exchange_record(exchange);
    /* A record that could not be made is still counted: _submit_unclosed(None). */
    PyObject *error = record == NULL ? exception_take() : NULL;
    PyObject *name = PyUnicode_FromString("_submit_unclosed");
    PyObject *result = name == NULL ? NULL
                       : PyObject_CallMethodOneArg((PyObject *)exchange->middleware, name,
                                                   record == NULL ? Py_None : record);
    Py_XDECREF(name);
    Py_XDECREF(record);
    Py_XDECREF(result);
    raise_after(error);
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(self);
    }
    if (raised != NULL) {
        exception_restore(raised);
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
    {"close", exchange_close, METH_NOARGS,
     "Closes the body, then hands the request's record over."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot exchange_slots[] = {
    {Py_tp_doc, "The response iterable a server gets from the compiled WSGI middleware."},
    {Py_tp_iter, exchange_iter},
    {Py_tp_methods, exchange_methods},
    {Py_tp_traverse, exchange_traverse},
    {Py_tp_clear, exchange_clear},
    {Py_tp_dealloc, exchange_dealloc},
    {Py_tp_finalize, exchange_finalize},
    {0, NULL},
};

PyType_Spec wsgi_exchange_spec = {
    .name = "boundlog._speedups.WsgiExchange",
    .basicsize = sizeof(Exchange),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = exchange_slots,
};

static int
body_traverse(PyObject *self, visitproc visit, void *arg)
{
    Body *counting = (Body *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(counting->exchange);
    Py_VISIT(counting->body);
    Py_VISIT(counting->iterator);
    return 0;
}

static int
body_clear(PyObject *self)
{
    Body *counting = (Body *)self;
    Py_CLEAR(counting->exchange);
    Py_CLEAR(counting->body);
    Py_CLEAR(counting->iterator);
    return 0;
}

static void
body_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    body_clear(self);
    PyObject_GC_Del(self);
    Py_DECREF(type);
}

static PyType_Slot body_slots[] = {
    {Py_tp_doc, "A WSGI body that is not a list or tuple, counted chunk by chunk."},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, body_next},
    {Py_tp_traverse, body_traverse},
    {Py_tp_clear, body_clear},
    {Py_tp_dealloc, body_dealloc},
    {0, NULL},
};

PyType_Spec wsgi_body_spec = {
    .name = "boundlog._speedups.WsgiBody",
    .basicsize = sizeof(Body),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = body_slots,
};
