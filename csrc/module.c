/* boundlog._speedups: the compiled core, imported through boundlog._core only.
 *
 * Its files, by what they do (each includes the others by its path from csrc/):
 *
 *   module.c, module_state.h  this module: its functions, its types, its state
 *   common/     what any part uses: the C API across versions (compat.h), the
 *               clocks, a growable byte buffer, the bytes of a str
 *   record/     a Record as C reads it, its extras, a Record packed in bytes, and
 *               the record budget's measures (and the notes copied within it)
 *   paths/      the request paths: the ASGI and WSGI middlewares (asgi_*, wsgi_*),
 *               the record of a WSGI environ, gunicorn's logger class's access, the
 *               hand-off to the queue
 *   selection/  the writer's filters and query join before formatting
 *   formats/    records to bytes on the writer thread: common and combined lines
 *               (clf), JSON lines, templates, and what they share (escaping, header
 *               fields, time stamps, values, trace ids)
 *   sinks/      what a sink sends, where it is not lines: OTLP's LogRecord in protobuf
 *
 * A folder includes only its own files, common/ and record/ (and paths/ the module's
 * state); module.c includes them all.
 *
 * The module's only state is its types and environ.c's names (ModuleState, per
 * module object, made by module_exec); its functions work on their arguments alone.
 * Nothing is shared between threads without a strong reference or a critical
 * section, so it is safe without the GIL (Py_MOD_GIL_NOT_USED). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "engine/queue.h"
#include "formats/clf.h"
#include "formats/json.h"
#include "formats/template.h"
#include "module_state.h"
#include "paths/asgi.h"
#include "paths/environ.h"
#include "paths/gunicorn.h"
#include "paths/handoff.h"
#include "paths/wsgi.h"
#include "record/packed.h"
#include "record/record.h"
#include "selection/select.h"
#include "sinks/otlp.h"
#include "sinks/relp.h"

static PyObject *
pack_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "pack_record() takes a record and, optionally, keeps");
        return NULL;
    }
    PackedKeeps keeps;
    if (packed_keeps(nargs > 1 ? args[1] : Py_None, &keeps) < 0) {
        return NULL;
    }
    ModuleState *state = PyModule_GetState(module);
    PyObject *packed = packed_from_record(state->packed_type, args[0], &keeps);
    packed_keeps_clear(&keeps);
    if (packed == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return packed;
}

static PyObject *
unpacked(PyObject *Py_UNUSED(module), PyObject *records)
{
    return packed_unpacked(records);
}

static PyMethodDef methods[] = {
    {"pack_record", (PyCFunction)(void (*)(void))pack_record, METH_FASTCALL,
     "pack_record(record, keeps=None) -> Packed | None\n\n"
     "The record packed as the C hand-off queues it, holding the header fields named\n"
     "in keeps (lower-case bytes; None: all), or None for a record of another shape\n"
     "(record/packed.h)."},
    {"unpacked", unpacked, METH_O,
     "unpacked(records) -> list\n\n"
     "The records, each Packed one as its Record (_core.CompiledFirst's fallback)."},
    {"format_apache", (PyCFunction)(void (*)(void))clf_format_apache, METH_FASTCALL,
     "format_apache(records, clock, names, environ_keys) -> bytes | None\n\n"
     "The common or combined lines of a batch, or None to leave it to the pure-Python\n"
     "core (_apache.ApacheFormat)."},
    {"format_json", (PyCFunction)(void (*)(void))json_format_json, METH_FASTCALL,
     "format_json(records, stamp_parts, texts, headers, taken, trace_header,\n"
     "            extras_fields) -> bytes | None\n\n"
     "The JSON lines of a batch, or None to leave it to the pure-Python core\n"
     "(_json.JsonFormat)."},
    {"format_logfmt", (PyCFunction)(void (*)(void))json_format_logfmt, METH_FASTCALL,
     "format_logfmt(records, stamp_parts, texts, headers, taken, trace_header,\n"
     "              extras_fields) -> bytes | None\n\n"
     "The logfmt lines of a batch, or None to leave it to the pure-Python core\n"
     "(_logfmt.LogfmtFormat)."},
    {"format_template", (PyCFunction)(void (*)(void))template_format_template, METH_FASTCALL,
     "format_template(records, ops, pid) -> bytes | None\n\n"
     "The lines of a batch in a compiled log template, or None to leave it to the\n"
     "pure-Python core (_templates.Template)."},
    {"otlp_log_record", (PyCFunction)(void (*)(void))otlp_log_record, METH_FASTCALL,
     "otlp_log_record(line, time_ns, observed_ns) -> bytes | None\n\n"
     "The protobuf LogRecord of a parsed otel preset line, or None to leave it to the\n"
     "pure-Python core (sinks/otlp/_logs.log_record)."},
    {"relp_await", (PyCFunction)(void (*)(void))relp_await, METH_FASTCALL,
     "relp_await(fd, expected, timeout_ms) -> bytes\n\n"
     "Read a RELP batch's answers with the GIL released, until `expected` has come, what\n"
     "came differs from it, the server closed (b'') or nothing came for timeout_ms\n"
     "(TimeoutError); the bytes received (sinks/_relp.RelpSession)."},
    {"learn_asgi_extras", (PyCFunction)(void (*)(void))asgi_learn_extras, METH_FASTCALL,
     "learn_asgi_extras(parts, scope, completed) -> Extras\n\n"
     "_extras.learner's learn(scope, completed) in C, with the parts\n"
     "_extras.compiled_learner makes."},
    {"environ_record", (PyCFunction)(void (*)(void))environ_record, METH_FASTCALL,
     "environ_record(record_type, environ, received, duration, status, sent,\n"
     "               request_headers, response_headers, bound, limit) -> Record | None\n\n"
     "_environ.environ_record for the usual environ, or None to leave it to the\n"
     "pure-Python core; limit >= 0: the budget bound (RecordBudget.bounded) checks."},
    {"select_records", (PyCFunction)(void (*)(void))select_records, METH_FASTCALL,
     "select_records(batch, skip_paths, path_prefixes, skip_path_errors, skip_status,\n"
     "               min_duration) -> list | None\n\n"
     "The records _filters.Select's cheap filters keep, or None to leave the batch to\n"
     "the pure-Python core."},
    {"joined_queries", (PyCFunction)(void (*)(void))select_joined_queries, METH_FASTCALL,
     "joined_queries(batch) -> bytes | None\n\n"
     "The batch's non-empty queries joined with b'&' (_redaction.QueryRedaction), or\n"
     "None to leave it to the pure-Python core."},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *module)
{
    ModuleState *state = PyModule_GetState(module);
    state->handoff_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &handoff_spec, NULL);
    state->middleware_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &middleware_spec, NULL);
    state->exchange_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &exchange_spec, NULL);
    state->capture_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &capture_spec, NULL);
    state->wsgi_middleware_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &wsgi_middleware_spec, NULL);
    state->wsgi_exchange_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &wsgi_exchange_spec, NULL);
    state->wsgi_body_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &wsgi_body_spec, NULL);
    state->packed_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &packed_spec, NULL);
    state->queue_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &queue_spec, NULL);
    state->gunicorn_access_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &gunicorn_access_spec, NULL);
    if (state->handoff_type == NULL || state->middleware_type == NULL
        || state->exchange_type == NULL || state->capture_type == NULL
        || state->wsgi_middleware_type == NULL || state->wsgi_exchange_type == NULL
        || state->wsgi_body_type == NULL || state->packed_type == NULL
        || state->queue_type == NULL || state->gunicorn_access_type == NULL) {
        return -1;
    }
    if (environ_names(state->environ_names) < 0
        || PyModule_AddType(module, state->handoff_type) < 0
        || PyModule_AddType(module, state->packed_type) < 0
        || PyModule_AddType(module, state->queue_type) < 0
        || PyModule_AddType(module, state->wsgi_middleware_type) < 0
        || PyModule_AddType(module, state->gunicorn_access_type) < 0
        || PyModule_AddIntConstant(module, "FIELD_OVERHEAD", FIELD_OVERHEAD) < 0) {
        return -1;
    }
    return PyModule_AddType(module, state->middleware_type);
}

static int
module_traverse(PyObject *module, visitproc visit, void *arg)
{
    ModuleState *state = PyModule_GetState(module);
    Py_VISIT(state->handoff_type);
    Py_VISIT(state->middleware_type);
    Py_VISIT(state->exchange_type);
    Py_VISIT(state->capture_type);
    Py_VISIT(state->wsgi_middleware_type);
    Py_VISIT(state->wsgi_exchange_type);
    Py_VISIT(state->wsgi_body_type);
    Py_VISIT(state->packed_type);
    Py_VISIT(state->queue_type);
    Py_VISIT(state->gunicorn_access_type);
    return 0;
}

static int
module_clear(PyObject *module)
{
    ModuleState *state = PyModule_GetState(module);
    Py_CLEAR(state->handoff_type);
    Py_CLEAR(state->middleware_type);
    Py_CLEAR(state->exchange_type);
    Py_CLEAR(state->capture_type);
    Py_CLEAR(state->wsgi_middleware_type);
    Py_CLEAR(state->wsgi_exchange_type);
    Py_CLEAR(state->wsgi_body_type);
    Py_CLEAR(state->packed_type);
    Py_CLEAR(state->queue_type);
    Py_CLEAR(state->gunicorn_access_type);
    for (int i = 0; i < ENVIRON_VARIABLES; i++) {
        Py_CLEAR(state->environ_names[i]);
    }
    return 0;
}

static void
module_free(void *module)
{
    module_clear((PyObject *)module);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* No static mutable state, no borrowed reference held across a call into Python,
     * critical sections around each object's own mutable state. */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "boundlog._speedups",
    .m_doc = "boundlog's compiled core (see boundlog._core).",
    .m_size = sizeof(ModuleState),
    .m_methods = methods,
    .m_slots = slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&module);
}
