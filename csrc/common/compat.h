/* What the C core needs from the C API that older CPythons spell differently.
 *
 * Free-threaded CPython (3.13t) is why most of this exists: there, a borrowed
 * reference from a dict or list can be freed by another thread between the read and
 * the incref, so items are taken as strong references (PyDict_GetItemRef,
 * PyList_GetItemRef), and an object's own mutable state is changed inside a critical
 * section on it.  On a build with the GIL the same code is correct, and the critical
 * sections cost nothing. */
#ifndef BOUNDLOG_COMPAT_H
#define BOUNDLOG_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030D0000
/* 1 and a strong reference in *result if found, 0 and NULL if not, -1 on error. */
static inline int
PyDict_GetItemRef(PyObject *dict, PyObject *key, PyObject **result)
{
    *result = Py_XNewRef(PyDict_GetItemWithError(dict, key));
    if (*result != NULL) {
        return 1;
    }
    return PyErr_Occurred() ? -1 : 0;
}
#endif

#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_READONLY READONLY
#endif

#ifndef Py_BEGIN_CRITICAL_SECTION
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
#endif

#if PY_VERSION_HEX < 0x030D0000
/* getattr(object, name, None) without making the AttributeError: 1 and a strong
 * reference in *result, 0 and NULL if there is no such attribute, -1 on error. */
static inline int
PyObject_GetOptionalAttr(PyObject *object, PyObject *name, PyObject **result)
{
    return _PyObject_LookupAttr(object, name, result);
}
#endif

/* The i-th item of a list or tuple as a strong reference, or NULL past its end (no
 * exception set): another thread may shorten a list meanwhile. */
static inline PyObject *
sequence_item_ref(PyObject *sequence, Py_ssize_t i)
{
    if (PyTuple_CheckExact(sequence)) {
        return i < PyTuple_GET_SIZE(sequence) ? Py_NewRef(PyTuple_GET_ITEM(sequence, i)) : NULL;
    }
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *item = PyList_GetItemRef(sequence, i);
    if (item == NULL) {
        PyErr_Clear(); /* IndexError: the list is shorter now */
    }
    return item;
#else
    return i < PyList_GET_SIZE(sequence) ? Py_NewRef(PyList_GET_ITEM(sequence, i)) : NULL;
#endif
}

/* The exception being raised, normalized, as one strong reference; none is set after. */
static inline PyObject *
exception_take(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (type == NULL) {
        return NULL;
    }
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL) {
        PyException_SetTraceback(value, traceback);
        Py_DECREF(traceback);
    }
    Py_DECREF(type);
    return value;
#endif
}

/* Raises `exception` again (a reference exception_take gave), stealing it. */
static inline void
exception_restore(PyObject *exception)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exception);
#else
    PyErr_Restore(Py_NewRef(Py_TYPE(exception)), exception, PyException_GetTraceback(exception));
#endif
}

#endif
