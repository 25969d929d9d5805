/* The middleware's call in C: the base class of asgi's compiled AccessLogMiddleware.
 *
 * Servers tell an ASGI 3 application from an ASGI 2 one by whether its __call__ is a
 * coroutine function (uvicorn, hypercorn: inspect.iscoroutinefunction), and a C
 * callable is not one.  So the Python class keeps its ``async def __call__`` (the
 * reference) where servers look, and calling an instance runs this type's tp_call
 * (see asgi.py's _CompiledAccessLogMiddleware).
 *
 * bind() is called once, from __init__, with everything the request path uses; the
 * fields are read-only afterwards, so a call needs no lock. */
#include "paths/asgi.h"

#include <string.h>

#include "common/compat.h"
#include "module_state.h"
#include "paths/app_attribute.h"
#include "paths/arguments.h"
#include "record/extras.h"

static const char *const name_strings[NAMES] = {
    [NAME_TYPE] = "type",
    [NAME_HTTP] = "http",
    [NAME_BODY_MESSAGE] = "http.response.body",
    [NAME_START_MESSAGE] = "http.response.start",
    [NAME_TRAILERS_MESSAGE] = "http.response.trailers",
    [NAME_PATHSEND_MESSAGE] = "http.response.pathsend",
    [NAME_BODY] = "body",
    [NAME_MORE_BODY] = "more_body",
    [NAME_TRAILERS] = "trailers",
    [NAME_MORE_TRAILERS] = "more_trailers",
    [NAME_STATUS] = "status",
    [NAME_HEADERS] = "headers",
    [NAME_CLIENT] = "client",
    [NAME_HTTP_VERSION] = "http_version",
    [NAME_RAW_PATH] = "raw_path",
    [NAME_QUERY_STRING] = "query_string",
    [NAME_METHOD] = "method",
    [NAME_RECEIVED] = "received",
};

/* bind()'s arguments, all keyword-only, in this order, each kept as it is. */
static const char *const bind_keywords[] = {
    "reference_call", "handoff", "admit_then", "submit_unfinished",
    "submit_on_close", "python_record", "file_size", "record_type", "protocols",
    "budget", "perf_counter", "wall_clock", "keeps_response_headers", "notes", "extras",
    "request_scope", "request_start", "counting_receive", "no_extras",
};
#define BIND_ARGUMENTS (sizeof(bind_keywords) / sizeof(bind_keywords[0]))

static PyObject **
bound_field(Middleware *middleware, size_t i)
{
    PyObject **fields[BIND_ARGUMENTS] = {
        &middleware->reference_call, &middleware->handoff,
        &middleware->admit_then, &middleware->submit_unfinished,
        &middleware->submit_on_close, &middleware->python_record, &middleware->file_size,
        &middleware->record_type, &middleware->protocols, &middleware->budget,
        &middleware->perf_counter, &middleware->wall_clock,
        &middleware->keeps_response_headers, &middleware->notes, &middleware->extras,
        &middleware->request_scope, &middleware->request_start,
        &middleware->counting_receive, &middleware->no_extras,
    };
    return fields[i];
}

/* The parts of `extras` when it is the compiled learner (_extras.compiled_learner:
 * functools.partial(learn_asgi_extras, parts), exactly), which the request path then
 * hands to asgi_learn_extras without the partial's call: a new reference, or NULL
 * (no exception) for any other extras function, which is called as it is. */
static PyObject *
compiled_learner_parts(PyObject *extras)
{
    if (strcmp(Py_TYPE(extras)->tp_name, "functools.partial") != 0) {
        return NULL;
    }
    PyObject *func = PyObject_GetAttrString(extras, "func");
    PyObject *args = func == NULL ? NULL : PyObject_GetAttrString(extras, "args");
    PyObject *keywords = args == NULL ? NULL : PyObject_GetAttrString(extras, "keywords");
    PyObject *parts = NULL;
    if (keywords != NULL && PyCFunction_Check(func)
        && PyCFunction_GetFunction(func) == (PyCFunction)(void (*)(void))asgi_learn_extras
        && PyTuple_CheckExact(args) && PyTuple_GET_SIZE(args) == 1
        && asgi_learn_parts_usable(PyTuple_GET_ITEM(args, 0))
        && PyDict_CheckExact(keywords) && PyDict_GET_SIZE(keywords) == 0) {
        parts = Py_NewRef(PyTuple_GET_ITEM(args, 0));
    }
    PyErr_Clear();
    Py_XDECREF(func);
    Py_XDECREF(args);
    Py_XDECREF(keywords);
    return parts;
}

static PyObject *
middleware_bind(PyObject *self, PyTypeObject *defining_class, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames)
{
    Middleware *middleware = (Middleware *)self;
    PyObject *values[BIND_ARGUMENTS];
    if (keyword_arguments(args, nargs, kwnames, bind_keywords, BIND_ARGUMENTS, values) < 0) {
        return NULL;
    }
    if (middleware->reference_call != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was called already");
        return NULL;
    }
    if (!PyType_Check(values[7]) || !PyDict_CheckExact(values[8]) || !PyBool_Check(values[12])) {
        PyErr_SetString(PyExc_TypeError, "bind(): record_type must be a type, protocols a "
                                         "dict, keeps_response_headers a bool");
        return NULL;
    }
    if (values[13] != Py_None && !PyContextVar_CheckExact(values[13])) {
        PyErr_SetString(PyExc_TypeError, "bind(): notes must be a ContextVar or None");
        return NULL;
    }
    if (values[14] != Py_None && !PyCallable_Check(values[14])) {
        PyErr_SetString(PyExc_TypeError, "bind(): extras must be callable or None");
        return NULL;
    }
    if ((values[17] != Py_None && !PyCallable_Check(values[17])) || !extras_usable(values[18])) {
        PyErr_SetString(PyExc_TypeError, "bind(): counting_receive must be callable or None, "
                                         "no_extras an Extras");
        return NULL;
    }
    int ids_off = values[15] == Py_None;
    if (ids_off != (values[16] == Py_None)
        || (!ids_off && (!PyCallable_Check(values[15]) || !PyCallable_Check(values[16])))) {
        PyErr_SetString(PyExc_TypeError, "bind(): request_scope and request_start must both "
                                         "be callable, or both None");
        return NULL;
    }
    PyObject *limit = PyObject_GetAttrString(values[9], "limit");
    Py_ssize_t budget_limit = limit == NULL ? -1 : PyLong_AsSsize_t(limit);
    Py_XDECREF(limit);
    if (budget_limit < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "bind(): budget.limit must not be negative");
        }
        return NULL;
    }
    ModuleState *state = PyType_GetModuleState(defining_class);
    if (!Py_IS_TYPE(values[1], state->handoff_type)) {
        PyErr_SetString(PyExc_TypeError, "bind(): handoff must be a Handoff (the log's _offer)");
        return NULL;
    }
    PyObject *names[NAMES];
    for (int i = 0; i < NAMES; i++) {
        names[i] = PyUnicode_InternFromString(name_strings[i]);
        if (names[i] == NULL) {
            while (--i >= 0) {
                Py_DECREF(names[i]);
            }
            return NULL;
        }
    }
    for (size_t i = 0; i < BIND_ARGUMENTS; i++) {
        *bound_field(middleware, i) = Py_NewRef(values[i]);
    }
    for (int i = 0; i < NAMES; i++) {
        middleware->names[i] = names[i];
    }
    middleware->exchange_type = (PyTypeObject *)Py_NewRef(state->exchange_type);
    middleware->capture_type = (PyTypeObject *)Py_NewRef(state->capture_type);
    middleware->budget_limit = budget_limit;
    middleware->learn_parts = compiled_learner_parts(middleware->extras);
    Py_RETURN_NONE;
}

/* 1 if `scope` is an "http" scope of a dict, 0 if not, -1 on error. */
static int
is_http(Middleware *middleware, PyObject *scope)
{
    if (!PyDict_CheckExact(scope)) {
        return 0;
    }
    PyObject *kind;
    if (dict_get_hinted(scope, middleware->names[NAME_TYPE], &middleware->hints[HINT_SCOPE_TYPE],
                        &kind) <= 0) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int rc = asgi_is(kind, middleware->names[NAME_HTTP]);
    Py_DECREF(kind);
    return rc;
}

static PyObject *
middleware_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    Middleware *middleware = (Middleware *)self;
    if (middleware->reference_call == NULL) {
        PyErr_SetString(PyExc_TypeError, "the middleware is not set up: its __init__ did "
                                         "not run");
        return NULL;
    }
    if (kwargs != NULL || PyTuple_GET_SIZE(args) != 3) {
        return PyObject_Call(middleware->reference_call, args, kwargs);
    }
    PyObject *scope = PyTuple_GET_ITEM(args, 0);
    int http = is_http(middleware, scope);
    if (http < 0) {
        return NULL;
    }
    if (!http) {
        /* Lifespan, websocket, or a scope of an odd type: the reference does it all. */
        return PyObject_Call(middleware->reference_call, args, NULL);
    }
    return exchange_new(middleware, scope, PyTuple_GET_ITEM(args, 1), PyTuple_GET_ITEM(args, 2));
}

static int
middleware_traverse(PyObject *self, visitproc visit, void *arg)
{
    Middleware *middleware = (Middleware *)self;
    Py_VISIT(Py_TYPE(self));
    for (size_t i = 0; i < BIND_ARGUMENTS; i++) {
        Py_VISIT(*bound_field(middleware, i));
    }
    Py_VISIT(middleware->app);
    Py_VISIT(middleware->learn_parts);
    Py_VISIT(middleware->exchange_type);
    Py_VISIT(middleware->capture_type);
    return 0;
}

static int
middleware_clear(PyObject *self)
{
    Middleware *middleware = (Middleware *)self;
    for (size_t i = 0; i < BIND_ARGUMENTS; i++) {
        Py_CLEAR(*bound_field(middleware, i));
    }
    Py_CLEAR(middleware->app);
    Py_CLEAR(middleware->learn_parts);
    Py_CLEAR(middleware->exchange_type);
    Py_CLEAR(middleware->capture_type);
    for (int i = 0; i < NAMES; i++) {
        Py_CLEAR(middleware->names[i]);
    }
    return 0;
}

static void
middleware_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    middleware_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

/* _records_held: how many records wait for their applications to return (asgi.py). */
static PyObject *
middleware_records_held(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(held_load(&((Middleware *)self)->held));
}

static PyGetSetDef middleware_getset[] = {
    APP_ATTRIBUTE_GETSET,
    {"_records_held", middleware_records_held, NULL,
     "Records held until their applications return (a log that reads notes).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef middleware_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))middleware_bind,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "bind(*, reference_call, handoff, ...): what the request path uses (asgi.py)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot middleware_slots[] = {
    {Py_tp_doc, "The compiled request path of boundlog.asgi.AccessLogMiddleware."},
    {Py_tp_call, middleware_call},
    {Py_tp_methods, middleware_methods},
    {Py_tp_getset, middleware_getset},
    {Py_tp_traverse, middleware_traverse},
    {Py_tp_clear, middleware_clear},
    {Py_tp_dealloc, middleware_dealloc},
    {0, NULL},
};

PyType_Spec middleware_spec = {
    .name = "boundlog._speedups.AsgiMiddleware",
    .basicsize = sizeof(Middleware),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE
             | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = middleware_slots,
};
