/* JSON lines (_json.JsonFormat), a batch at a time. */
#ifndef BOUNDLOG_JSON_H
#define BOUNDLOG_JSON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* format_json(records, stamp_parts, texts, headers, taken) -> bytes | None
 *
 * `stamp_parts` is the format's Rfc3339Clock.parts: parts(second) gives a second's
 * stamp as the bytes before its milliseconds and after them.  `texts` are the line's
 * own text around the built-in fields, keys included: 10 bytes objects, before the
 * time, client, method, path, query, protocol, status, bytes sent and duration, and
 * the line's end.  `headers` are the header fields after them, in order, each a tuple
 * (text before it, from the response (bool), lower-case name, WSGI environ key, JSON
 * string written for a present value instead of it (redaction) or None).  `taken` is
 * the frozenset of the keys before the notes: a note of one of those names (which the
 * reference prefixes with "app."), a note whose value is not None, a bool, an int of
 * 64 bits, a float or a str, or notes that are not a dict of str keys, are left to the
 * pure-Python core.
 *
 * None means "not handled here": a record holds a value of a type this code does not
 * read, an integer past 64 bits, a time this code or the clock refuses; the caller
 * then formats the batch with the pure-Python core, which is the reference. */
PyObject *json_format_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
