/* The keyword-only arguments of the bind() methods, which hand a compiled request
 * path everything it uses once, from Python. */
#ifndef BOUNDLOG_ARGUMENTS_H
#define BOUNDLOG_ARGUMENTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* Each of the `count` names in `keywords` given once by keyword, nothing else:
 * values[i] gets the (borrowed) argument of keywords[i].  0, or -1 with TypeError set. */
static inline int
keyword_arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  const char *const *keywords, size_t count, PyObject **values)
{
    Py_ssize_t given = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs != 0 || given != (Py_ssize_t)count) {
        PyErr_Format(PyExc_TypeError, "bind() takes exactly %d keyword arguments", (int)count);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        values[i] = NULL;
    }
    for (Py_ssize_t k = 0; k < given; k++) {
        const char *keyword = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        size_t i = 0;
        while (keyword != NULL && i < count && strcmp(keyword, keywords[i]) != 0) {
            i++;
        }
        if (keyword == NULL || i == count || values[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "bind() got an unexpected keyword argument %R",
                         PyTuple_GET_ITEM(kwnames, k));
            return -1;
        }
        values[i] = args[k];
    }
    return 0;
}

#endif
