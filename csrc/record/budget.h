/* The record budget (record/_budget.py) as the C request paths measure it: what a
 * record keeps of the client's and the application's bytes, by the reference's
 * estimate, and the usual notes copied within it.
 *
 * Why: the hand-off checks each record against its share of the queue's byte budget,
 * and the middlewares copy a request's notes (the fields the application added) once
 * the application is done with it.  The reference's copy (a Python call that measures
 * each note and the record's header fields) cost about 10k instructions a request, a
 * tenth of uvicorn's own work.  Notes of the kinds applications add (str names; values
 * None, bool, float, str, an int of 64 bits), which fit in the room the record's other
 * fields leave, are copied here and measured as the reference measures them; any other
 * (a value the reference turns into its text, notes it must cut) is left to the
 * reference.  The C and Python middlewares are held equal by
 * tests/speedups/test_speedups_asgi.py and test_speedups_wsgi.py, the hand-off's
 * measure by tests/speedups/test_speedups_handoff.py. */
#ifndef BOUNDLOG_BUDGET_H
#define BOUNDLOG_BUDGET_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "record/packed.h"

/* len() of bytes or a str, as the budget measures a text; -1 for anything else. */
Py_ssize_t budget_text_length(PyObject *value);

/* _budget._headers_size: the header fields, pairs of bytes or str (a list or a tuple)
 * or a dict of environ fields (its str values count), added to *size; 1, or 0 for
 * fields of other kinds (*size then means nothing). */
int budget_headers_size(PyObject *headers, Py_ssize_t *size);

/* What a record's path, query and header fields take of the budget (_budget._used):
 * path and query bytes or str, the header fields as budget_headers_size reads them.
 * 1 with *used (at most `limit`), 0 for fields of other kinds. */
int budget_used(PyObject *path, PyObject *query, PyObject *headers, Py_ssize_t limit,
                Py_ssize_t *used);

/* budget_used for a packed record (record/packed.h) that holds no notes: what its
 * path, query and the request's header fields (all of them, not only those it holds)
 * take of the budget by the estimate, at most `limit` (not its `cost`, which is what
 * the queue charges). */
Py_ssize_t budget_packed_used(Packed *packed, Py_ssize_t limit);

/* RecordBudget.notes for the usual notes: a copy of `notes` (an exact dict), when they
 * are of the usual kinds and fit in what `used` leaves of `limit`.  1 with *bounded a
 * new reference, 0 to leave them to the reference, -1 on error. */
int budget_notes(PyObject *notes, Py_ssize_t limit, Py_ssize_t used, PyObject **bounded);

#endif
