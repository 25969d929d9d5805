/* The WSGI middleware's call in C: the base class of wsgi's compiled
 * AccessLogMiddleware (wsgi.py's _CompiledAccessLogMiddleware).
 *
 * bind() is called once, from __init__, with everything the request path uses; those
 * fields are read-only afterwards, so a call needs no lock.  Only `app`, which the
 * reference reads at each request and a user may set, changes. */
#include "paths/wsgi.h"

#include "common/compat.h"
#include "module_state.h"
#include "paths/app_attribute.h"
#include "paths/arguments.h"
#include "record/extras.h"

/* bind()'s arguments, all keyword-only, in this order; `limit` and the flags last. */
static const char *const bind_keywords[] = {
    "reference_call", "handoff", "submit", "status_code", "status_codes", "picked_keys",
    "bound", "python_record", "record_type", "perf_counter", "wall_clock",
    "keeps_response_headers", "notes", "extras", "request_ids", "trace", "counting_input",
    "no_extras", "limit", "counts_chunks",
};
#define BIND_ARGUMENTS (sizeof(bind_keywords) / sizeof(bind_keywords[0]))
/* All but limit and counts_chunks, which are kept as C values. */
#define BOUND_FIELDS (BIND_ARGUMENTS - 2)

static PyObject **
bound_field(WsgiMiddleware *middleware, size_t i)
{
    PyObject **fields[BOUND_FIELDS] = {
        &middleware->reference_call, &middleware->handoff, &middleware->submit,
        &middleware->status_code, &middleware->status_codes, &middleware->picked_keys,
        &middleware->bound, &middleware->python_record, &middleware->record_type,
        &middleware->perf_counter, &middleware->wall_clock,
        &middleware->keeps_response_headers, &middleware->notes, &middleware->extras,
        &middleware->request_ids, &middleware->trace, &middleware->counting_input,
        &middleware->no_extras,
    };
    return fields[i];
}

static PyObject *
wsgi_middleware_bind(PyObject *self, PyTypeObject *defining_class, PyObject *const *args,
                     Py_ssize_t nargs, PyObject *kwnames)
{
    WsgiMiddleware *middleware = (WsgiMiddleware *)self;
    PyObject *values[BIND_ARGUMENTS];
    if (keyword_arguments(args, nargs, kwnames, bind_keywords, BIND_ARGUMENTS, values) < 0) {
        return NULL;
    }
    if (middleware->reference_call != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was called already");
        return NULL;
    }
    PyObject *picked_keys = values[5];
    int keys_usual = picked_keys == Py_None || PyTuple_CheckExact(picked_keys);
    for (Py_ssize_t i = 0; keys_usual && picked_keys != Py_None
                           && i < PyTuple_GET_SIZE(picked_keys); i++) {
        keys_usual = PyUnicode_CheckExact(PyTuple_GET_ITEM(picked_keys, i));
    }
    if (!PyDict_CheckExact(values[4]) || !keys_usual || !PyType_Check(values[8])
        || !PyBool_Check(values[11])) {
        PyErr_SetString(PyExc_TypeError, "bind(): status_codes must be a dict, picked_keys "
                                         "a tuple of str or None, record_type a type and "
                                         "keeps_response_headers a bool");
        return NULL;
    }
    if (values[12] != Py_None && !PyContextVar_CheckExact(values[12])) {
        PyErr_SetString(PyExc_TypeError, "bind(): notes must be a ContextVar or None");
        return NULL;
    }
    for (int i = 13; i <= 16; i++) {
        if (values[i] != Py_None && !PyCallable_Check(values[i])) {
            PyErr_SetString(PyExc_TypeError, "bind(): extras, request_ids, trace and "
                                             "counting_input must be callable or None");
            return NULL;
        }
    }
    if (!extras_usable(values[17])) {
        PyErr_SetString(PyExc_TypeError, "bind(): no_extras must be an Extras");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(values[18]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyBool_Check(values[19])) {
        PyErr_SetString(PyExc_TypeError, "bind(): counts_chunks must be a bool");
        return NULL;
    }
    ModuleState *state = PyType_GetModuleState(defining_class);
    if (!Py_IS_TYPE(values[1], state->handoff_type)) {
        PyErr_SetString(PyExc_TypeError, "bind(): handoff must be a Handoff (the log's _offer)");
        return NULL;
    }
    PyObject *close_name = PyUnicode_InternFromString("close");
    PyObject *input_name = PyUnicode_InternFromString("wsgi.input");
    PyObject *bytes_read_name = PyUnicode_InternFromString("bytes_read");
    if (close_name == NULL || input_name == NULL || bytes_read_name == NULL) {
        Py_XDECREF(close_name);
        Py_XDECREF(input_name);
        Py_XDECREF(bytes_read_name);
        return NULL;
    }
    for (size_t i = 0; i < BOUND_FIELDS; i++) {
        *bound_field(middleware, i) = Py_NewRef(values[i]);
    }
    middleware->close_name = close_name;
    middleware->input_name = input_name;
    middleware->bytes_read_name = bytes_read_name;
    middleware->module = Py_NewRef(PyType_GetModule(defining_class));
    middleware->exchange_type = (PyTypeObject *)Py_NewRef(state->wsgi_exchange_type);
    middleware->body_type = (PyTypeObject *)Py_NewRef(state->wsgi_body_type);
    middleware->limit = limit;
    middleware->counts_chunks = values[19] == Py_True;
    Py_RETURN_NONE;
}

static PyObject *
wsgi_middleware_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    WsgiMiddleware *middleware = (WsgiMiddleware *)self;
    if (middleware->reference_call == NULL) {
        PyErr_SetString(PyExc_TypeError, "the middleware is not set up: its __init__ did "
                                         "not run");
        return NULL;
    }
    if (kwargs != NULL || PyTuple_GET_SIZE(args) != 2) {
        /* Keywords: the reference (wsgi.py). */
        return PyObject_Call(middleware->reference_call, args, kwargs);
    }
    return wsgi_exchange_run(middleware, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1));
}

static int
wsgi_middleware_traverse(PyObject *self, visitproc visit, void *arg)
{
    WsgiMiddleware *middleware = (WsgiMiddleware *)self;
    Py_VISIT(Py_TYPE(self));
    for (size_t i = 0; i < BOUND_FIELDS; i++) {
        Py_VISIT(*bound_field(middleware, i));
    }
    Py_VISIT(middleware->app);
    Py_VISIT(middleware->module);
    Py_VISIT(middleware->exchange_type);
    Py_VISIT(middleware->body_type);
    return 0;
}

static int
wsgi_middleware_clear(PyObject *self)
{
    WsgiMiddleware *middleware = (WsgiMiddleware *)self;
    for (size_t i = 0; i < BOUND_FIELDS; i++) {
        Py_CLEAR(*bound_field(middleware, i));
    }
    Py_CLEAR(middleware->app);
    Py_CLEAR(middleware->module);
    Py_CLEAR(middleware->close_name);
    Py_CLEAR(middleware->input_name);
    Py_CLEAR(middleware->bytes_read_name);
    Py_CLEAR(middleware->exchange_type);
    Py_CLEAR(middleware->body_type);
    return 0;
}

static void
wsgi_middleware_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    wsgi_middleware_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyGetSetDef wsgi_middleware_getset[] = {
    APP_ATTRIBUTE_GETSET,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef wsgi_middleware_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))wsgi_middleware_bind,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "bind(*, reference_call, handoff, ...): what the request path uses (wsgi.py)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot wsgi_middleware_slots[] = {
    {Py_tp_doc, "The compiled request path of boundlog.wsgi.AccessLogMiddleware."},
    {Py_tp_call, wsgi_middleware_call},
    {Py_tp_methods, wsgi_middleware_methods},
    {Py_tp_getset, wsgi_middleware_getset},
    {Py_tp_traverse, wsgi_middleware_traverse},
    {Py_tp_clear, wsgi_middleware_clear},
    {Py_tp_dealloc, wsgi_middleware_dealloc},
    {0, NULL},
};

PyType_Spec wsgi_middleware_spec = {
    .name = "boundlog._speedups.WsgiMiddleware",
    .basicsize = sizeof(WsgiMiddleware),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = wsgi_middleware_slots,
};
