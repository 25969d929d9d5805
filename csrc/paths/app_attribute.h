/* The `app` attribute of the compiled middlewares (asgi_middleware.c,
 * wsgi_middleware.c): the application they wrap.
 *
 * The reference reads self.app at each request, and so do the C paths: an application
 * set after the middleware was made is the one called.  It is the one field of a
 * middleware that changes after bind(), so it is read and set under a critical
 * section.  Both types start with these fields.  Their exchanges read it here too
 * (app_attribute_read), so that no exchange calls back into its middleware's file. */
#ifndef BOUNDLOG_APP_ATTRIBUTE_H
#define BOUNDLOG_APP_ATTRIBUTE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common/compat.h"

typedef struct {
    PyObject_HEAD
    PyObject *app;
} WithApp;

/* The application, a new reference (NULL with AttributeError if there is none). */
static inline PyObject *
app_attribute_read(PyObject *self)
{
    PyObject *app;
    Py_BEGIN_CRITICAL_SECTION(self);
    app = Py_XNewRef(((WithApp *)self)->app);
    Py_END_CRITICAL_SECTION();
    if (app == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute 'app'",
                     Py_TYPE(self)->tp_name);
    }
    return app;
}

static inline PyObject *
app_attribute_get(PyObject *self, void *Py_UNUSED(closure))
{
    return app_attribute_read(self);
}

static inline int
app_attribute_set(PyObject *self, PyObject *app, void *Py_UNUSED(closure))
{
    if (app == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete app");
        return -1;
    }
    Py_BEGIN_CRITICAL_SECTION(self);
    Py_XSETREF(((WithApp *)self)->app, Py_NewRef(app));
    Py_END_CRITICAL_SECTION();
    return 0;
}

#define APP_ATTRIBUTE_GETSET \
    {"app", app_attribute_get, app_attribute_set, "The application the middleware wraps.", NULL}

#endif
