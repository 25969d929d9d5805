/* The WSGI middleware's request path in C: what wsgi.AccessLogMiddleware and its
 * _Exchange do for a request, two files:
 *
 *   wsgi_middleware.c  the middleware's call: runs the application with the
 *                      exchange's start_response, and returns the exchange
 *   wsgi_exchange.c    the exchange: the response iterable the server sees, which
 *                      counts the body's bytes and hands the record over on close(),
 *                      its start_response and write, and the iterator that counts a
 *                      body that is not a list or tuple
 *
 * wsgi.py stays the reference: tests/speedups/test_speedups_wsgi.py runs arbitrary applications
 * and servers through both and compares what the server sees, the records and the
 * counts.  The record is environ.c's; an environ it does not read goes to
 * _environ.environ_record, and a queue with no room to log.submit (the policy). */
#ifndef BOUNDLOG_WSGI_H
#define BOUNDLOG_WSGI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *app; /* the `app` attribute, read under a critical section */
    /* Set by bind(), all strong references; NULL until then. */
    PyObject *reference_call; /* AccessLogMiddleware.__call__, bound: for keywords */
    PyObject *handoff;        /* the log's Handoff (log._offer) */
    PyObject *submit;         /* log.submit: the policy, when the queue had no room */
    PyObject *status_code;    /* wsgi._status_code: the code of any status line */
    PyObject *status_codes;   /* wsgi._STANDARD_STATUS_CODES, a dict */
    PyObject *picked_keys;    /* the environ keys of the fields the log reads, or None */
    PyObject *bound;          /* the budget's bounded_environ */
    PyObject *python_record;  /* _environ.environ_record, for an environ environ.c leaves */
    PyObject *record_type;    /* boundlog.Record */
    PyObject *perf_counter;   /* time.perf_counter and time.time: the reference's clocks */
    PyObject *wall_clock;
    PyObject *keeps_response_headers; /* bool */
    PyObject *notes;          /* _notes.NOTES when the log reads notes, else None */
    PyObject *extras;         /* (environ) -> Extras when the log reads extras, else None */
    PyObject *request_ids;    /* (environ, start_response) -> start_response that adds the
                               * request's id, when the middleware gives ids, else None
                               * (_request_id.RequestIds.wsgi) */
    PyObject *trace;          /* () -> the current span's ids, when the log reads them,
                               * else None (_extras.wsgi_trace_reader) */
    PyObject *counting_input; /* (stream) -> the wsgi.input the application gets, which
                               * counts in `bytes_read` what it reads, when the log reads
                               * bytes_received (_counting.CountingReader), else None */
    PyObject *no_extras;      /* _extras.NO_EXTRAS: the extras of a log that reads none */
    PyObject *input_name;     /* "wsgi.input" and "bytes_read", interned */
    PyObject *bytes_read_name;
    PyObject *module;         /* boundlog._speedups, whose state environ_record reads */
    PyObject *close_name;     /* "close", interned */
    PyTypeObject *exchange_type;
    PyTypeObject *body_type;
    Py_ssize_t limit; /* the budget's limit for picked fields; -1 for a whole environ */
    int counts_chunks; /* a list or tuple body is counted chunk by chunk as the server
                        * takes it, as for any other body (wsgi.py says when) */
} WsgiMiddleware;

extern PyType_Spec wsgi_middleware_spec;
extern PyType_Spec wsgi_exchange_spec;
extern PyType_Spec wsgi_body_spec;

/* Runs one request: the application called with `environ` and the exchange's
 * start_response; the exchange (a new reference), or NULL with the application's
 * exception set once the record is handed over. */
PyObject *wsgi_exchange_run(WsgiMiddleware *middleware, PyObject *environ,
                            PyObject *start_response);

#endif
