/* boundlog._speedups: the compiled core, imported through boundlog._core only.
 *
 * The module keeps no state: every function works on its arguments alone, so it
 * needs no per-module state and is safe without the GIL (Py_MOD_GIL_NOT_USED). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "clf.h"
#include "json.h"

static PyMethodDef methods[] = {
    {"format_apache", (PyCFunction)(void (*)(void))clf_format_apache, METH_FASTCALL,
     "format_apache(records, clock, names, environ_keys) -> bytes | None\n\n"
     "The common or combined lines of a batch, or None to leave it to the pure-Python\n"
     "core (_formats.ApacheFormat)."},
    {"format_json", (PyCFunction)(void (*)(void))json_format_json, METH_FASTCALL,
     "format_json(records, stamp_parts, texts, headers) -> bytes | None\n\n"
     "The JSON lines of a batch, or None to leave it to the pure-Python core\n"
     "(_json.JsonFormat)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* No static mutable state, no borrowed reference held across a call into Python. */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "boundlog._speedups",
    .m_doc = "boundlog's compiled core (see boundlog._core).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&module);
}
