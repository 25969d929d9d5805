/* The ASGI middleware's request path in C: what asgi.AccessLogMiddleware does for an
 * HTTP request: three types and the record, one file each.
 *
 *   asgi_middleware.c  the middleware's call: an Exchange for an HTTP scope, the
 *                      pure-Python __call__ for any other
 *   asgi_exchange.c    the awaitable that runs the application for one request and
 *                      hands over its record if the response never finished
 *   asgi_send.c        the send wrapper (Capture) that counts status and bytes and
 *                      hands over the record with the response's last message
 *   asgi_record.c      the record built from the scope
 *   asgi_learn.c       the extras learnt when the response ends: route, span
 *
 * Calls between them go one way, down this list: the middleware makes exchanges, an
 * exchange its send wrapper, and all three call asgi_record.c; none calls a file above
 * it (the exchange reads the middleware's application with app_attribute.h, as the
 * WSGI exchange does).
 *
 * The Python module asgi.py stays the reference: every path here that is rare or
 * unusual (a queue with no room, a scope of unexpected types, a request over the
 * record budget) calls the Python function that does it there, which Middleware
 * holds.  tests/speedups/test_speedups_asgi.py checks that both give the same records, messages
 * and exceptions for arbitrary applications. */
#ifndef BOUNDLOG_ASGI_H
#define BOUNDLOG_ASGI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common/dict_hint.h"

#ifdef __STDC_NO_ATOMICS__
typedef volatile Py_ssize_t HeldCount;
#define held_add(count, n) ((void)(*(count) += (n)))
#define held_load(count) (*(count))
#else
#include <stdatomic.h>
typedef _Atomic Py_ssize_t HeldCount;
#define held_add(count, n) ((void)atomic_fetch_add_explicit((count), (n), memory_order_relaxed))
#define held_load(count) atomic_load_explicit((count), memory_order_relaxed)
#endif
#include "paths/handoff.h"

/* The dict keys and message types the request path compares with, interned once per
 * middleware, not kept in the module's state (module_state.h). */
enum {
    NAME_TYPE, NAME_HTTP, NAME_BODY_MESSAGE, NAME_START_MESSAGE, NAME_TRAILERS_MESSAGE,
    NAME_PATHSEND_MESSAGE, NAME_BODY, NAME_MORE_BODY, NAME_TRAILERS, NAME_MORE_TRAILERS,
    NAME_STATUS, NAME_HEADERS, NAME_CLIENT, NAME_HTTP_VERSION, NAME_RAW_PATH,
    NAME_QUERY_STRING, NAME_METHOD, NAME_RECEIVED,
    NAMES
};

/* The items read from each request's dicts (the scope, the response's messages, and
 * asgi._PROTOCOLS by the scope's http_version) at the position the previous request's
 * had them (common/dict_hint.h). */
enum {
    HINT_SCOPE_TYPE, HINT_CLIENT, HINT_METHOD, HINT_RAW_PATH, HINT_HEADERS, HINT_HTTP_VERSION,
    HINT_QUERY_STRING, HINT_PROTOCOL, HINT_MESSAGE_TYPE, HINT_STATUS, HINT_BODY,
    HINTS
};

typedef struct {
    PyObject_HEAD
    PyObject *app; /* the `app` attribute: app_attribute.h reads it */
    /* Set by bind(), all strong references; NULL until then. */
    PyObject *reference_call; /* AccessLogMiddleware.__call__, bound: other scopes */
    PyObject *handoff;        /* the log's Handoff (log._offer): the queue (handoff.c) */
    PyObject *admit_then;     /* async (record, send, message): queue full at the end */
    PyObject *submit_unfinished; /* async (record, error): after the app, queue full */
    PyObject *submit_on_close;   /* (record): a closed exchange, which cannot wait */
    PyObject *python_record;  /* asgi._record, for the scopes asgi_record.c leaves */
    PyObject *file_size;      /* asgi._file_size, for pathsend */
    PyObject *record_type;    /* boundlog.Record */
    PyObject *protocols;      /* asgi._PROTOCOLS */
    PyObject *budget;         /* the log's RecordBudget */
    PyObject *perf_counter;   /* time.perf_counter and time.time: the reference's clocks */
    PyObject *wall_clock;
    PyObject *keeps_response_headers; /* bool */
    PyObject *notes;          /* _notes.NOTES when the log reads notes, else None */
    PyObject *extras;         /* (scope, completed) -> Extras when the log reads extras, else None */
    PyObject *request_scope;  /* (scope) -> (scope, id) when the middleware gives request
                               * ids, else None (_request_id.RequestIds.asgi_scope) */
    PyObject *request_start;  /* (message, id) -> message, the start message with the id
                               * (RequestIds.asgi_start), else None */
    PyObject *counting_receive; /* (receive) -> the receive the application gets, which
                                 * counts in `received` the request body's bytes, when
                                 * the log reads them (asgi._CountingReceive), else None */
    PyObject *no_extras;      /* _extras.NO_EXTRAS: the extras of a log that reads none */
    PyObject *learn_parts;    /* when `extras` is the compiled learner, a
                               * functools.partial of learn_asgi_extras over these parts:
                               * asgi_record.c calls asgi_learn_extras itself; else NULL */
    PyTypeObject *exchange_type;
    PyTypeObject *capture_type;
    Py_ssize_t budget_limit;
    PyObject *names[NAMES];
    DictHint hints[HINTS];
    /* Records held for applications still running after their response (a log reading
     * notes: asgi_send.c), for the lifespan shutdown to wait for (asgi.py's
     * _records_held).  Moved by whichever thread holds or hands one over. */
    HeldCount held;
} Middleware;

/* One request's response, as the send wrapper sees it go by. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Middleware *middleware;
    PyObject *scope;
    PyObject *send;
    PyObject *response;  /* the start message, or NULL before it and once handed over */
    PyObject *status;    /* NULL until the start message: 0 */
    PyObject *sent_object; /* what pathsend set bytes_sent to, or the count past Py_ssize_t
                            * (any int), or NULL */
    PyObject *notes;       /* the request's notes (a dict) when the log reads them */
    PyObject *request_id;  /* the request's id when the middleware gives ids, else NULL */
    PyObject *held;        /* a log reading notes: the record of the response that ended,
                            * held until the application returns (asgi_send.c) */
    PyObject *counting_receive; /* what counting_receive made for the request, else NULL */
    Py_ssize_t sent;       /* body bytes counted, added to sent_object if set */
    double started;        /* perf_counter() when the exchange started */
    int finished;          /* the record is handed over */
} Capture;

extern PyType_Spec middleware_spec;
extern PyType_Spec exchange_spec;
extern PyType_Spec capture_spec;

/* The record of `capture`'s exchange with status `status`; a new reference, or NULL
 * with an exception set (the reference's, for a scope it fails on).  Made packed
 * (record/packed.h) when the log's hand-off packs and the record has the shape. */
PyObject *asgi_record(Capture *capture, PyObject *status, int completed);

/* `record` with the notes `capture`'s request has now (_notes.snapshot): a new
 * reference (`record` itself when it had none and there are none), or NULL with an
 * exception set. */
PyObject *asgi_with_notes(Capture *capture, PyObject *record);

/* value == name, for a str `name`: 1, 0, or -1 on error. */
int asgi_is(PyObject *value, PyObject *name);

/* message[name] (a KeyError if absent) or message.get(name, fallback), for a dict or
 * any mapping; new references, NULL on error.  A dict is read where the last one had
 * the item (`hint`, one of the middleware's hints; NULL for none: dict_hint.h). */
PyObject *asgi_item_hinted(PyObject *mapping, PyObject *name, DictHint *hint);
PyObject *asgi_get_hinted(PyObject *mapping, PyObject *name, PyObject *fallback,
                          DictHint *hint);

static inline PyObject *
asgi_item(PyObject *mapping, PyObject *name)
{
    return asgi_item_hinted(mapping, name, NULL);
}

static inline PyObject *
asgi_get(PyObject *mapping, PyObject *name, PyObject *fallback)
{
    return asgi_get_hinted(mapping, name, fallback, NULL);
}
/* Whether mapping.get(name) is true: 1, 0, or -1 on error. */
int asgi_flag(PyObject *mapping, PyObject *name);

/* A new Exchange for one call of the middleware (asgi_exchange.c). */
PyObject *exchange_new(Middleware *middleware, PyObject *scope, PyObject *receive,
                       PyObject *send);

/* A new Capture for one exchange. */
Capture *capture_new(Middleware *middleware, PyObject *scope, PyObject *send, double started);

/* learn_asgi_extras(parts, scope, completed) -> Extras: _extras.learner's learn in C
 * (asgi_learn.c), with the parts _extras.compiled_learner makes. */
PyObject *asgi_learn_extras(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Whether `parts` are of the shape _extras.compiled_learner makes them. */
int asgi_learn_parts_usable(PyObject *parts);

/* What learn_asgi_extras learns, before the Extras is made of it: its EXTRAS_FIELDS
 * fields as new references in fields[] and its class in *type; 0, or -1 with an
 * exception set (fields[] all NULL).  `parts` asgi_learn_parts_usable. */
int asgi_learn_fields(PyObject *parts, PyObject *scope, PyObject *completed,
                      PyObject **fields, PyTypeObject **type);

/* The Extras of the fields asgi_learn_fields learnt, which it takes (fields[] NULL
 * after, even on error): a new reference, or NULL. */
PyObject *asgi_learnt_extras(PyTypeObject *type, PyObject **fields);

#endif
