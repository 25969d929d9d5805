/* The per-batch cache of time stamps (stamps.h). */
#include "formats/stamps.h"

#include <math.h>

#include "record/record.h"

void
stamps_clear(Stamps *stamps)
{
    for (int i = 0; i < STAMPS_CACHED_SECONDS; i++) {
        Py_CLEAR(stamps->value[i]);
    }
}

PyObject *
stamps_find(const Stamps *stamps, long long second)
{
    for (int i = 0; i < STAMPS_CACHED_SECONDS; i++) {
        if (stamps->value[i] != NULL && stamps->second[i] == second) {
            return stamps->value[i];
        }
    }
    return NULL;
}

void
stamps_keep(Stamps *stamps, long long second, PyObject *value)
{
    Py_XSETREF(stamps->value[stamps->next], value);
    stamps->second[stamps->next] = second;
    stamps->next = (stamps->next + 1) % STAMPS_CACHED_SECONDS;
}

/* Whether a time of this second may be looked up in (and kept in) the cache: the
 * condition ClfClock.stamps tests, a time that truncates to its second and does not
 * round up to the next one (datetime rounds to the microsecond).  The upper bound
 * keeps the conversion defined; NaN fails the first test. */
static int
cacheable_second(double t, long long *second)
{
    if (t >= 0 && t < 1e15 && (t - trunc(t)) * 1e6 < 999999.5) {
        *second = (long long)t;
        return 1;
    }
    return 0;
}

/* Asks the clock for the stamp of `when` and appends it, keeping it for `second` when
 * cacheable. */
static int
ask_clock(Buffer *buffer, Stamps *stamps, PyObject *clock, PyObject *when, int cacheable,
          long long second)
{
    PyObject *stamp = PyObject_CallOneArg(clock, when);
    if (stamp == NULL || !PyBytes_CheckExact(stamp)) {
        /* The reference raises the same error for this time (or, for a clock that does
         * not give bytes, whatever it does): let it. */
        Py_XDECREF(stamp);
        PyErr_Clear();
        return UNSUPPORTED;
    }
    int rc = buffer_write(buffer, PyBytes_AS_STRING(stamp), PyBytes_GET_SIZE(stamp));
    if (cacheable) {
        stamps_keep(stamps, second, stamp);
    }
    else {
        Py_DECREF(stamp);
    }
    return rc;
}

int
stamps_write_seconds(Buffer *buffer, Stamps *stamps, PyObject *clock, double when)
{
    long long second = 0;
    int cacheable = cacheable_second(when, &second);
    if (cacheable) {
        PyObject *stamp = stamps_find(stamps, second);
        if (stamp != NULL) {
            return buffer_write(buffer, PyBytes_AS_STRING(stamp), PyBytes_GET_SIZE(stamp));
        }
    }
    PyObject *time = PyFloat_FromDouble(when);
    if (time == NULL) {
        return -1;
    }
    int rc = ask_clock(buffer, stamps, clock, time, cacheable, second);
    Py_DECREF(time);
    return rc;
}

int
stamps_write_clock(Buffer *buffer, Stamps *stamps, PyObject *clock, PyObject *when)
{
    int cacheable = 0;
    long long second = 0;
    if (PyFloat_CheckExact(when)) {
        cacheable = cacheable_second(PyFloat_AS_DOUBLE(when), &second);
        if (cacheable) {
            PyObject *stamp = stamps_find(stamps, second);
            if (stamp != NULL) {
                return buffer_write(buffer, PyBytes_AS_STRING(stamp), PyBytes_GET_SIZE(stamp));
            }
        }
    }
    else if (!PyLong_CheckExact(when)) {
        return UNSUPPORTED;
    }
    return ask_clock(buffer, stamps, clock, when, cacheable, second);
}
