/* The time stamps of the seconds a batch was seen in last, made by a Python clock.
 *
 * A batch spans one second, or two: each format keeps, for the length of one call,
 * the clock's answers for the last two seconds it asked about, so that the clock is
 * called once per distinct second, not once per record. */
#ifndef BOUNDLOG_STAMPS_H
#define BOUNDLOG_STAMPS_H

#include "common/buffer.h"

#define STAMPS_CACHED_SECONDS 2

typedef struct {
    long long second[STAMPS_CACHED_SECONDS];
    PyObject *value[STAMPS_CACHED_SECONDS]; /* strong references, or NULL */
    int next;                               /* the slot to replace next */
} Stamps;

#define STAMPS_INIT {{0}, {NULL}, 0}

/* Drops the references held. */
void stamps_clear(Stamps *stamps);
/* The value kept for `second` (borrowed: the cache holds it), or NULL. */
PyObject *stamps_find(const Stamps *stamps, long long second);
/* Keeps `value` (a strong reference, stolen) for `second`, in place of the oldest. */
void stamps_keep(Stamps *stamps, long long second, PyObject *value);

/* Appends the stamp of a record's time `when` made by `clock` (a ClfClock or a
 * StrftimeClock: clock(when) -> bytes, the text around the stamp included): 0, -1 with
 * an exception set, or UNSUPPORTED (record.h) for a time of another type than float or
 * int, or one the clock raised for (the reference raises the same: let it). */
int stamps_write_clock(Buffer *buffer, Stamps *stamps, PyObject *clock, PyObject *when);

/* stamps_write_clock for a float time given as a double (a Packed record's): the float
 * is made only when the clock must be asked. */
int stamps_write_seconds(Buffer *buffer, Stamps *stamps, PyObject *clock, double when);

#endif
