/* time.perf_counter() and time.time() without a call into Python: the clocks CPython
 * reads for them, so that a duration measured here from a start taken by Python (or
 * the reverse: asgi._record falls back to Python) is still right.
 *
 * CPython 3.13 gives them to C (PyTime_PerfCounterRaw, PyTime_TimeRaw).  Before, on
 * Linux, they are CLOCK_MONOTONIC and CLOCK_REALTIME; elsewhere the Python function
 * itself is called (macOS's perf_counter, for one, is not CLOCK_MONOTONIC there). */
#ifndef BOUNDLOG_CLOCK_H
#define BOUNDLOG_CLOCK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030D0000 && defined(__linux__)
#include <time.h>
#define CLOCK_FROM_LINUX 1
#endif

typedef enum { CLOCK_PERF_COUNTER, CLOCK_WALL } ClockKind;

/* Seconds by the clock `kind`, or -1.0 with an exception set.  `function` is the
 * Python function of that clock (time.perf_counter or time.time), called where C
 * cannot read it. */
static inline double
clock_seconds(ClockKind kind, PyObject *function)
{
#if PY_VERSION_HEX >= 0x030D0000
    (void)function;
    PyTime_t now;
    int rc = kind == CLOCK_PERF_COUNTER ? PyTime_PerfCounterRaw(&now) : PyTime_TimeRaw(&now);
    if (rc < 0) {
        PyErr_SetString(PyExc_OSError, "cannot read the clock");
        return -1.0;
    }
    return PyTime_AsSecondsDouble(now);
#elif defined(CLOCK_FROM_LINUX)
    (void)function;
    struct timespec now;
    if (clock_gettime(kind == CLOCK_PERF_COUNTER ? CLOCK_MONOTONIC : CLOCK_REALTIME, &now) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1.0;
    }
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
#else
    (void)kind;
    PyObject *now = PyObject_CallNoArgs(function);
    if (now == NULL) {
        return -1.0;
    }
    double seconds = PyFloat_AsDouble(now);
    Py_DECREF(now);
    return seconds;
#endif
}

#endif
