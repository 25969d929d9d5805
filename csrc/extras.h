/* A record's extras (_record.Extras) as the formats read them: None, or a tuple of
 * the fields below, in order; and the values of a record's dicts of named values (its
 * notes, its extras' environ). */
#ifndef BOUNDLOG_EXTRAS_H
#define BOUNDLOG_EXTRAS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { EXTRAS_ROUTE, EXTRAS_TRACE, EXTRAS_COMPLETED, EXTRAS_BYTES_RECEIVED, EXTRAS_CLOSE_CODE,
       EXTRAS_ENVIRON, EXTRAS_FIELDS };

/* The field `index` of the record's extras in *field, None when the record has none
 * (the reference's `None if extras is None else extras[index]`): borrowed from the
 * record, which the caller holds, and a tuple's items cannot change.  0, or
 * UNSUPPORTED (record.h) for extras that are not a tuple of EXTRAS_FIELDS items. */
int extras_field(PyObject *record, int index, PyObject **field);

/* The value of `name` (a str) in `values`, a record's dict of named values (its notes,
 * its extras' environ), as a strong reference in *value, or NULL when it holds none
 * (`values` None, or the name absent).  0, or UNSUPPORTED for `values` that are not an
 * exact dict (another mapping's lookup is Python code) or a lookup that raised. */
int extras_lookup(PyObject *values, PyObject *name, PyObject **value);

/* The value of the server variable `name` (a str) in the record's extras.environ, as
 * a strong reference in *value, or NULL when the environ holds none (no extras, an
 * environ of None or empty, the name absent).  0, or UNSUPPORTED for extras
 * extras_field refuses or an environ extras_lookup refuses. */
int extras_environ_value(PyObject *record, PyObject *name, PyObject **value);

#endif
