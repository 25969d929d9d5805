/* The state of the module boundlog._speedups, one per module object (module.c makes,
 * visits and clears it): the types its request paths make instances of, and the
 * names of the WSGI variables environ.c reads.  A type's methods reach it through
 * PyType_GetModuleState(defining_class), a module function through its module.
 *
 * Everything else the C core keeps belongs to one object (what a middleware's bind()
 * was given, the names a middleware or Handoff interns) or lasts one call (a format's
 * arguments): there is no other module state, and no mutable static data. */
#ifndef BOUNDLOG_MODULE_STATE_H
#define BOUNDLOG_MODULE_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "paths/environ.h"

typedef struct {
    PyTypeObject *handoff_type;         /* paths/handoff.h's */
    PyTypeObject *middleware_type;      /* paths/asgi.h's */
    PyTypeObject *exchange_type;
    PyTypeObject *capture_type;
    PyTypeObject *wsgi_middleware_type; /* paths/wsgi.h's */
    PyTypeObject *wsgi_exchange_type;
    PyTypeObject *wsgi_body_type;
    PyTypeObject *packed_type;          /* record/packed.h's */
    PyTypeObject *queue_type;           /* engine/queue.h's */
    PyTypeObject *gunicorn_access_type; /* paths/gunicorn.h's */
    PyObject *environ_names[ENVIRON_VARIABLES];
} ModuleState;

#endif
