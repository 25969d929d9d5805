/* What an ASGI log's extras function learns when the response ends (_extras.learner's
 * `learn(scope, completed)`), in C: the route the application matched and the ids of
 * the OpenTelemetry span current in the request's context, without a Python call for
 * the usual exchange.
 *
 * The reference asks OpenTelemetry's API (get_current_span().get_span_context(), then
 * is_valid, trace_id and span_id: four Python calls and a frame each) and reads the
 * scope in Python.  Here the span is read where the API reads it: the context variable
 * of the API's runtime context (opentelemetry.context._RUNTIME_CONTEXT, when it is the
 * contextvars one), its value a dict in which the span is kept under the API's key.
 * _extras.compiled_learner hands those over only when they are what this reads, and
 * the span's get_span_context() is still called, since a span may be any class.
 *
 * The scope's route is read here when it is boundlog's own key, a template string,
 * or a route object (FastAPI's APIRoute, a Starlette Route) outside any Mount; under
 * a Mount it goes to the reference's asgi_route, which knows their prefixes.  tests/speedups/test_speedups_learn.py holds the two equal. */
#include "paths/asgi.h"

#include "common/compat.h"
#include "record/extras.h"

/* The parts, a tuple made once by _extras.compiled_learner. */
enum {
    PART_EXTRAS_TYPE,   /* boundlog.Extras */
    PART_READS_ROUTE,   /* bool */
    PART_ROUTE_KEY,     /* "boundlog.route" */
    PART_ASGI_ROUTE,    /* _routes.asgi_route, for a route object */
    PART_READS_DONE,    /* bool: the log reads `completed` */
    PART_CONTEXT_VAR,   /* the runtime context's ContextVar, or None: no trace read */
    PART_SPAN_KEY,      /* the API's key of the current span in a context */
    PART_SPAN_TYPE,     /* opentelemetry.trace.Span */
    PART_SPAN_CONTEXT,  /* opentelemetry.trace.SpanContext */
    PART_NAMES,         /* ("route", "path_template", "get_span_context", "is_valid",
                         *  "trace_id", "span_id", "path_format", "app_root_path") */
    PARTS
};
enum { NAMED_ROUTE, NAMED_TEMPLATE, NAMED_GET_SPAN_CONTEXT, NAMED_IS_VALID, NAMED_TRACE_ID,
       NAMED_SPAN_ID, NAMED_PATH_FORMAT, NAMED_APP_ROOT_PATH, NAMED };

/* scope.get(key) as a strong reference or NULL; -1 on error.  The scope is an exact
 * dict (checked by the caller). */
static int
scope_get(PyObject *scope, PyObject *key, PyObject **value)
{
    return PyDict_GetItemRef(scope, key, value);
}

/* _routes._starlette_template(scope, route) for a route outside any Mount (no
 * app_root_path in the scope: every route of an application that mounts nothing), the
 * usual case; under a Mount, the reference's asgi_route, which knows their prefixes.
 * A new reference (None when the object has no template), NULL on error. */
static PyObject *
route_template(PyObject *const *parts, PyObject *scope, PyObject *route)
{
    PyObject *names = parts[PART_NAMES];
    PyObject *template;
    if (PyObject_GetOptionalAttr(route, PyTuple_GET_ITEM(names, NAMED_PATH_FORMAT), &template)
        < 0) {
        return NULL;
    }
    if (template == NULL || !PyUnicode_CheckExact(template)) {
        /* A Host, or whatever some other framework keeps under "route". */
        Py_XDECREF(template);
        Py_RETURN_NONE;
    }
    PyObject *app_root;
    if (scope_get(scope, PyTuple_GET_ITEM(names, NAMED_APP_ROOT_PATH), &app_root) < 0) {
        Py_DECREF(template);
        return NULL;
    }
    if (app_root == NULL || app_root == Py_None) {
        Py_XDECREF(app_root);
        return template;
    }
    Py_DECREF(app_root);
    Py_DECREF(template);
    return PyObject_CallOneArg(parts[PART_ASGI_ROUTE], scope);
}

/* _routes.asgi_route(scope): a new reference (None when unknown), NULL on error. */
static PyObject *
route_of(PyObject *const *parts, PyObject *scope)
{
    PyObject *names = parts[PART_NAMES];
    if (!PyDict_CheckExact(scope)) {
        return PyObject_CallOneArg(parts[PART_ASGI_ROUTE], scope);
    }
    PyObject *value;
    if (scope_get(scope, parts[PART_ROUTE_KEY], &value) < 0) {
        return NULL;
    }
    if (value != NULL && PyUnicode_CheckExact(value)) {
        return value;
    }
    Py_XDECREF(value);
    if (scope_get(scope, PyTuple_GET_ITEM(names, NAMED_ROUTE), &value) < 0) {
        return NULL;
    }
    if (value != NULL && value != Py_None) {
        /* A route object (FastAPI puts the APIRoute it matched there): its template. */
        PyObject *template = route_template(parts, scope, value);
        Py_DECREF(value);
        return template;
    }
    Py_XDECREF(value);
    if (scope_get(scope, PyTuple_GET_ITEM(names, NAMED_TEMPLATE), &value) < 0) {
        return NULL;
    }
    if (value != NULL && PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) > 0) {
        return value;
    }
    Py_XDECREF(value);
    Py_RETURN_NONE;
}

/* A SpanContext's field: read from the tuple when it is the API's own class, whose
 * properties read these items, else by the attribute. */
static PyObject *
span_context_field(PyObject *const *parts, PyObject *context, Py_ssize_t index, int named)
{
    if (Py_IS_TYPE(context, (PyTypeObject *)parts[PART_SPAN_CONTEXT])
        && PyTuple_GET_SIZE(context) > 5) {
        return Py_NewRef(PyTuple_GET_ITEM(context, index));
    }
    return PyObject_GetAttr(context, PyTuple_GET_ITEM(parts[PART_NAMES], named));
}

/* _extras.trace_reader's current_trace(): (trace_id, span_id) of the span current in
 * the caller's context, None when there is none or it is not valid; NULL on error. */
static PyObject *
current_trace(PyObject *const *parts)
{
    PyObject *context;
    if (PyContextVar_Get(parts[PART_CONTEXT_VAR], NULL, &context) < 0) {
        return NULL;
    }
    if (context == NULL) {
        Py_RETURN_NONE;
    }
    PyObject *span = NULL;
    int found;
    if (PyDict_Check(context)) {
        /* The API's Context is a dict that only refuses item assignment: its get() is
         * dict's (_extras.compiled_learner checks). */
        found = PyDict_GetItemRef(context, parts[PART_SPAN_KEY], &span);
    }
    else {
        span = PyObject_CallMethod(context, "get", "O", parts[PART_SPAN_KEY]);
        found = span == NULL ? -1 : 1;
    }
    Py_DECREF(context);
    if (found < 0) {
        return NULL;
    }
    if (span == NULL || span == Py_None) {
        /* INVALID_SPAN: its context is not valid. */
        Py_XDECREF(span);
        Py_RETURN_NONE;
    }
    int is_span = PyObject_IsInstance(span, parts[PART_SPAN_TYPE]);
    if (is_span <= 0) {
        Py_DECREF(span);
        return is_span < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *span_context = PyObject_CallMethodNoArgs(
        span, PyTuple_GET_ITEM(parts[PART_NAMES], NAMED_GET_SPAN_CONTEXT));
    Py_DECREF(span);
    if (span_context == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    PyObject *valid = span_context_field(parts, span_context, 5, NAMED_IS_VALID);
    int is_valid = valid == NULL ? -1 : PyObject_IsTrue(valid);
    Py_XDECREF(valid);
    if (is_valid == 0) {
        result = Py_NewRef(Py_None);
    }
    else if (is_valid > 0) {
        PyObject *trace_id = span_context_field(parts, span_context, 0, NAMED_TRACE_ID);
        PyObject *span_id = trace_id == NULL ? NULL
                            : span_context_field(parts, span_context, 1, NAMED_SPAN_ID);
        if (span_id != NULL) {
            result = PyTuple_Pack(2, trace_id, span_id);
            if (result != NULL && !PyObject_IS_GC(trace_id) && !PyObject_IS_GC(span_id)) {
                /* Two ids that are no containers (ints) can be in no cycle: the
                 * collector need not see the pair
                 * (it would untrack it at its first pass, after walking it). */
                PyObject_GC_UnTrack(result);
            }
        }
        Py_XDECREF(trace_id);
        Py_XDECREF(span_id);
    }
    Py_DECREF(span_context);
    return result;
}

int
asgi_learn_parts_usable(PyObject *parts)
{
    return PyTuple_CheckExact(parts) && PyTuple_GET_SIZE(parts) == PARTS
           && PyTuple_CheckExact(PyTuple_GET_ITEM(parts, PART_NAMES))
           && PyTuple_GET_SIZE(PyTuple_GET_ITEM(parts, PART_NAMES)) == NAMED
           && PyType_Check(PyTuple_GET_ITEM(parts, PART_EXTRAS_TYPE));
}

int
asgi_learn_fields(PyObject *parts_tuple, PyObject *scope, PyObject *completed,
                  PyObject **fields, PyTypeObject **type)
{
    PyObject *const *parts = &PyTuple_GET_ITEM(parts_tuple, 0);
    for (int i = 0; i < EXTRAS_FIELDS; i++) {
        fields[i] = NULL;
    }
    /* In the reference's order: the route, then the trace. */
    fields[EXTRAS_ROUTE] = parts[PART_READS_ROUTE] == Py_True ? route_of(parts, scope)
                                                              : Py_NewRef(Py_None);
    if (fields[EXTRAS_ROUTE] == NULL) {
        return -1;
    }
    fields[EXTRAS_TRACE] = parts[PART_CONTEXT_VAR] != Py_None ? current_trace(parts)
                                                              : Py_NewRef(Py_None);
    if (fields[EXTRAS_TRACE] == NULL) {
        Py_CLEAR(fields[EXTRAS_ROUTE]);
        return -1;
    }
    fields[EXTRAS_COMPLETED] = Py_NewRef(parts[PART_READS_DONE] == Py_True ? completed : Py_None);
    for (int i = EXTRAS_BYTES_RECEIVED; i < EXTRAS_FIELDS; i++) {
        fields[i] = Py_NewRef(Py_None);
    }
    *type = (PyTypeObject *)parts[PART_EXTRAS_TYPE];
    return 0;
}

PyObject *
asgi_learnt_extras(PyTypeObject *type, PyObject **fields)
{
    /* new_extras: tuple.__new__ of the type, as the reference builds it. */
    PyObject *extras = type->tp_alloc(type, EXTRAS_FIELDS);
    if (extras == NULL) {
        for (int i = 0; i < EXTRAS_FIELDS; i++) {
            Py_CLEAR(fields[i]);
        }
        return NULL;
    }
    /* A queued record keeps its extras alive for a batch's time: one the collector
     * need not see costs it no walk in each collection meanwhile (the record itself
     * is untracked for the same reason, asgi_record.c). */
    int atomic = 1;
    for (int i = 0; i < EXTRAS_FIELDS; i++) {
        /* Untracked tuples stay so (immutable); a mutable untracked container may
         * start holding anything. */
        atomic = atomic && (!PyObject_IS_GC(fields[i])
                            || (PyTuple_CheckExact(fields[i]) && !PyObject_GC_IsTracked(fields[i])));
        PyTuple_SET_ITEM(extras, i, fields[i]);
        fields[i] = NULL;
    }
    if (atomic) {
        PyObject_GC_UnTrack(extras);
    }
    return extras;
}

PyObject *
asgi_learn_extras(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !asgi_learn_parts_usable(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "learn_asgi_extras(parts, scope, completed): parts as "
                        "_extras.compiled_learner makes them");
        return NULL;
    }
    PyObject *fields[EXTRAS_FIELDS];
    PyTypeObject *type;
    if (asgi_learn_fields(args[0], args[1], args[2], fields, &type) < 0) {
        return NULL;
    }
    return asgi_learnt_extras(type, fields);
}
