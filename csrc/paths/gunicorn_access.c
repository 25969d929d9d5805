/* gunicorn's logger class's access() in C (gunicorn.h).
 *
 * gunicorn calls its logger's access(resp, req, environ, request_time) on the request's
 * thread once the response is sent.  boundlog.gunicorn.Logger.access, the reference,
 * runs a hundred bytecodes there before the record is made: on gunicorn's gthread
 * worker that was about 4k instructions a request, a third of what the logger class
 * added.  GunicornAccess does the same in C for the usual request: a `timedelta` of
 * a sane size, a status gunicorn's own table knows (or None, or not a str), a usual
 * environ (environ.c).  For anything else it returns False before it has handed
 * anything over, and Logger.access runs the reference, which then does (or raises)
 * what it always did; an error before the hand-off is dropped for the same reason.
 *
 * Everything it holds is set when it is made and never changes: a call needs no lock
 * or critical section, with or without the GIL. */
#include "paths/gunicorn.h"

#include <stddef.h>

#include "common/clock.h"
#include "common/compat.h"
#include "module_state.h"
#include "paths/handoff.h"

/* The attributes read per call, interned when the object is made. */
enum { NAME_STATUS, NAME_SENT, NAME_HEADERS, NAME_DAYS, NAME_SECONDS, NAME_MICROSECONDS, NAMES };
static const char *const name_strings[NAMES] = {"status", "sent", "headers", "days", "seconds",
                                               "microseconds"};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *module;         /* boundlog._speedups: environ_record's state */
    PyObject *offer;          /* log._offer: a Handoff */
    PyObject *submit;         /* log.submit */
    PyObject *bound;          /* log.record_budget.bounded */
    PyObject *limit;          /* log.record_budget.limit, an int */
    PyObject *learn;          /* what the log's extras learn of an environ, or None */
    int reads_response_headers;
    PyObject *record_type;    /* boundlog.Record */
    PyObject *status_codes;   /* wsgi._STANDARD_STATUS_CODES: {"200 OK": 200, ...} */
    PyObject *timedelta_type; /* datetime.timedelta, imported when made */
    PyObject *wall_clock;     /* time.time, for clock.h where C cannot read it */
    PyObject *empty;          /* () */
    PyObject *names[NAMES];
} GunicornAccess;

/* timedelta.total_seconds() of `delta` (an exact timedelta), for days within a range
 * whose microseconds a double holds exactly (2**53 of them is 285 years): then one
 * division, correctly rounded, as Python's int / int is.  0, 1 for a delta left to the
 * reference, or -1 on error.  Read as attributes: datetime.h's macros would bring its
 * C API's static pointer, state this module does not keep. */
#define MAX_DAYS 100000

static int
total_seconds(GunicornAccess *access, PyObject *delta, double *seconds)
{
    long long parts[3];
    for (int i = 0; i < 3; i++) {
        PyObject *part = PyObject_GetAttr(delta, access->names[NAME_DAYS + i]);
        if (part == NULL) {
            return -1;
        }
        parts[i] = PyLong_AsLongLong(part);
        Py_DECREF(part);
        if (parts[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    if (parts[0] > MAX_DAYS || parts[0] < -MAX_DAYS) {
        return 1;
    }
    long long microseconds = (parts[0] * 86400 + parts[1]) * 1000000LL + parts[2];
    *seconds = (double)microseconds / 1e6;
    return 0;
}

/* The status the record gets from gunicorn's resp.status (a strong reference), or
 * NULL with no exception for one the reference must parse (a str gunicorn's table
 * does not have, a subclass of str), or NULL with an exception set. */
static PyObject *
status_of(GunicornAccess *access, PyObject *status)
{
    if (status == Py_None) {
        /* The application raised before start_response; gunicorn answers 500. */
        return PyLong_FromLong(500);
    }
    if (PyUnicode_CheckExact(status)) {
        PyObject *code;
        if (PyDict_GetItemRef(access->status_codes, status, &code) <= 0) {
            return NULL;
        }
        return code;
    }
    if (PyUnicode_Check(status)) {
        return NULL;
    }
    return Py_NewRef(status);
}

/* The record of the request, or NULL: with an exception set on error, none when it is
 * the reference's to make.  Nothing has been handed over either way. */
static PyObject *
record_of(GunicornAccess *access, PyObject *resp, PyObject *req, PyObject *environ,
          PyObject *request_time)
{
    double duration;
    if (!Py_IS_TYPE(request_time, (PyTypeObject *)access->timedelta_type)
        || total_seconds(access, request_time, &duration) != 0) {
        return NULL;
    }
    if (duration < 0.0) {
        duration = 0.0;
    }
    PyObject *resp_status = PyObject_GetAttr(resp, access->names[NAME_STATUS]);
    PyObject *status = resp_status == NULL ? NULL : status_of(access, resp_status);
    Py_XDECREF(resp_status);
    if (status == NULL) {
        return NULL;
    }
    PyObject *record = NULL;
    PyObject *received = NULL, *elapsed = NULL, *sent = NULL, *request_headers = NULL;
    PyObject *response_headers = NULL, *extras = NULL;
    double now = clock_seconds(CLOCK_WALL, access->wall_clock);
    if (PyErr_Occurred() || (received = PyFloat_FromDouble(now - duration)) == NULL
        || (elapsed = PyFloat_FromDouble(duration)) == NULL) {
        goto done;
    }
    /* resp.sent or 0 */
    if ((sent = PyObject_GetAttr(resp, access->names[NAME_SENT])) == NULL) {
        goto done;
    }
    int truth = PyObject_IsTrue(sent);
    if (truth < 0) {
        goto done;
    }
    if (!truth) {
        Py_SETREF(sent, PyLong_FromLong(0));
        if (sent == NULL) {
            goto done;
        }
    }
    /* getattr(req, "headers", req): some workers pass the pairs in place of the request. */
    if (PyObject_GetOptionalAttr(req, access->names[NAME_HEADERS], &request_headers) < 0) {
        goto done;
    }
    if (request_headers == NULL) {
        request_headers = Py_NewRef(req);
    }
    if (!access->reads_response_headers) {
        response_headers = Py_NewRef(access->empty);
    }
    else if (PyObject_GetOptionalAttr(resp, access->names[NAME_HEADERS], &response_headers) < 0) {
        goto done;
    }
    else if (response_headers == NULL) {
        response_headers = Py_NewRef(access->empty);
    }
    if (access->learn == Py_None) {
        extras = Py_NewRef(Py_None);
    }
    else {
        /* The response completed (a request logged with an exception on its way
         * through goes to the reference), and no span is current any more. */
        PyObject *args[] = {environ, Py_True, Py_None};
        if ((extras = PyObject_Vectorcall(access->learn, args, 3, NULL)) == NULL) {
            goto done;
        }
    }
    PyObject *args[12] = {access->record_type, environ, received, elapsed, status, sent,
                          request_headers, response_headers, access->bound, access->limit,
                          Py_None, extras};
    record = environ_record(access->module, args, 12);
    if (record == Py_None) {
        Py_CLEAR(record); /* an environ environ.c does not read */
    }
done:
    Py_DECREF(status);
    Py_XDECREF(received);
    Py_XDECREF(elapsed);
    Py_XDECREF(sent);
    Py_XDECREF(request_headers);
    Py_XDECREF(response_headers);
    Py_XDECREF(extras);
    return record;
}

/* access(resp, req, environ, request_time) -> bool: True once the record is handed
 * over, as Logger.access hands it; False, having done nothing, for the reference. */
static PyObject *
gunicorn_access_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                           PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 4 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError,
                        "GunicornAccess takes (resp, req, environ, request_time)");
        return NULL;
    }
    /* Logged from gunicorn's finally (or except) with an exception on its way through:
     * the request failed, and gunicorn may log it again from handle_error.  Which call
     * is the line is the reference's to tell (Logger._status_after_a_failure). */
    PyObject *handled = PyErr_GetHandledException();
    int failed = handled != NULL && handled != Py_None;
    Py_XDECREF(handled);
    if (failed) {
        Py_RETURN_FALSE;
    }
    GunicornAccess *access = (GunicornAccess *)self;
    PyObject *record = record_of(access, args[0], args[1], args[2], args[3]);
    if (record == NULL) {
        /* The reference makes the record, or raises what went wrong. */
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    int rc = handoff_submit((Handoff *)access->offer, access->submit, record);
    Py_DECREF(record);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyObject *
gunicorn_access_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *offer, *submit, *bound, *limit, *learn, *record_type, *status_codes, *wall_clock;
    int reads_response_headers;
    char *keywords[] = {"offer", "submit", "bound", "limit", "learn", "reads_response_headers",
                        "record_type", "status_codes", "wall_clock", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OOOO!OpOO!O:GunicornAccess", keywords,
                                     &offer, &submit, &bound, &PyLong_Type, &limit, &learn,
                                     &reads_response_headers, &record_type, &PyDict_Type,
                                     &status_codes, &wall_clock)) {
        return NULL;
    }
    ModuleState *state = PyType_GetModuleState(type);
    PyObject *module = PyType_GetModule(type);
    if (state == NULL || module == NULL) {
        return NULL;
    }
    if (!Py_IS_TYPE(offer, state->handoff_type)) {
        PyErr_SetString(PyExc_TypeError,
                        "GunicornAccess(): offer must be a Handoff (the log's _offer)");
        return NULL;
    }
    /* The type total_seconds reads the fields of. */
    PyObject *datetime = PyImport_ImportModule("datetime");
    PyObject *timedelta_type = datetime == NULL ? NULL
                               : PyObject_GetAttrString(datetime, "timedelta");
    Py_XDECREF(datetime);
    PyObject *empty = timedelta_type == NULL ? NULL : PyTuple_New(0);
    if (empty == NULL) {
        Py_XDECREF(timedelta_type);
        return NULL;
    }
    GunicornAccess *access = (GunicornAccess *)type->tp_alloc(type, 0);
    if (access == NULL) {
        Py_DECREF(timedelta_type);
        Py_DECREF(empty);
        return NULL;
    }
    access->vectorcall = gunicorn_access_vectorcall;
    access->module = Py_NewRef(module);
    access->offer = Py_NewRef(offer);
    access->submit = Py_NewRef(submit);
    access->bound = Py_NewRef(bound);
    access->limit = Py_NewRef(limit);
    access->learn = Py_NewRef(learn);
    access->reads_response_headers = reads_response_headers;
    access->record_type = Py_NewRef(record_type);
    access->status_codes = Py_NewRef(status_codes);
    access->timedelta_type = timedelta_type;
    access->wall_clock = Py_NewRef(wall_clock);
    access->empty = empty;
    /* Zeroed by tp_alloc: a failure here leaves NULLs for gunicorn_access_clear. */
    for (int i = 0; i < NAMES; i++) {
        access->names[i] = PyUnicode_InternFromString(name_strings[i]);
        if (access->names[i] == NULL) {
            Py_DECREF(access);
            return NULL;
        }
    }
    return (PyObject *)access;
}

static int
gunicorn_access_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    GunicornAccess *access = (GunicornAccess *)self;
    Py_VISIT(access->module);
    Py_VISIT(access->offer);
    Py_VISIT(access->submit);
    Py_VISIT(access->bound);
    Py_VISIT(access->learn);
    Py_VISIT(access->record_type);
    Py_VISIT(access->status_codes);
    Py_VISIT(access->timedelta_type);
    Py_VISIT(access->wall_clock);
    return 0;
}

static int
gunicorn_access_clear(PyObject *self)
{
    GunicornAccess *access = (GunicornAccess *)self;
    Py_CLEAR(access->module);
    Py_CLEAR(access->offer);
    Py_CLEAR(access->submit);
    Py_CLEAR(access->bound);
    Py_CLEAR(access->limit);
    Py_CLEAR(access->learn);
    Py_CLEAR(access->record_type);
    Py_CLEAR(access->status_codes);
    Py_CLEAR(access->timedelta_type);
    Py_CLEAR(access->wall_clock);
    Py_CLEAR(access->empty);
    for (int i = 0; i < NAMES; i++) {
        Py_CLEAR(access->names[i]);
    }
    return 0;
}

static void
gunicorn_access_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    gunicorn_access_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef gunicorn_access_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(GunicornAccess, vectorcall), Py_READONLY,
     NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot gunicorn_access_slots[] = {
    {Py_tp_doc, "GunicornAccess(*, offer, submit, bound, limit, learn, reads_response_headers,\n"
                "record_type, status_codes, wall_clock): a callable,\n"
                "access(resp, req, environ, request_time) -> bool, that hands the request's\n"
                "record over as boundlog.gunicorn.Logger.access does (True), or does\n"
                "nothing and leaves the request to it (False)."},
    {Py_tp_new, gunicorn_access_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, gunicorn_access_members},
    {Py_tp_traverse, gunicorn_access_traverse},
    {Py_tp_clear, gunicorn_access_clear},
    {Py_tp_dealloc, gunicorn_access_dealloc},
    {0, NULL},
};

PyType_Spec gunicorn_access_spec = {
    .name = "boundlog._speedups.GunicornAccess",
    .basicsize = sizeof(GunicornAccess),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = gunicorn_access_slots,
};
