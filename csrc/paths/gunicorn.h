/* gunicorn's logger class's access(resp, req, environ, request_time) in C, for the
 * usual request: boundlog.gunicorn.Logger.access stays the reference, and runs for
 * everything this hands back. */
#ifndef BOUNDLOG_GUNICORN_H
#define BOUNDLOG_GUNICORN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyType_Spec gunicorn_access_spec;

#endif
