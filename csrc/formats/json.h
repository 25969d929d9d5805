/* JSON lines (_json.JsonFormat), a batch at a time. */
#ifndef BOUNDLOG_JSON_H
#define BOUNDLOG_JSON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* format_json(records, stamp_parts, texts, headers, taken, trace_header, extras_fields)
 *     -> bytes | None
 *
 * `stamp_parts` is the format's Rfc3339Clock.parts: parts(second) gives a second's
 * stamp as the bytes before its milliseconds and after them.  `texts` are the line's
 * own text around the built-in fields, keys included: 14 bytes objects, before the
 * time, client, method, path, query, protocol, status, bytes sent and duration, the
 * line's end, and before the route, trace id, span id and completion.  `headers` are
 * the header fields, in order, the route, trace ids and completion coming after the
 * first three (the built-in referer, user_agent and request_id), each a tuple
 * (text before it, from the response (bool), lower-case name, WSGI environ key, JSON
 * string written for a present value instead of it (redaction) or None).  `taken` is
 * the frozenset of the keys before the notes: a note of one of those names (which the
 * reference prefixes with "app."), a note whose value is not one scalar.h writes, or
 * notes that are not a dict of str keys, are left to the pure-Python core.
 * `trace_header` is the traceparent field's (lower-case name, WSGI environ key), read
 * for the trace ids of a record whose extras hold no span's (trace.h).
 * `extras_fields` are the fields the format adds after the completion (extras= and
 * environ=), in order, each a tuple (text before it, source): the source an int, the
 * index of a field of the record's extras (extras.h), or a str, the name of a server
 * variable in its extras.environ; each value is written as scalar.h writes it, null
 * when unknown.
 *
 * None means "not handled here": a record holds a value of a type this code does not
 * read, an integer past 64 bits, a time this code or the clock refuses; the caller
 * then formats the batch with the pure-Python core, which is the reference. */
PyObject *json_format_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* format_logfmt(records, stamp_parts, texts, headers, taken, trace_header, extras_fields)
 *     -> bytes | None
 *
 * The logfmt lines of _logfmt.LogfmtFormat: the same walk as format_json's, with the
 * same arguments, whose texts are ` key=` (the time's `key=`, the line's end "\n");
 * each value is loosened as it is written (logfmt.h).  A note whose name is not a
 * logfmt key as it is (logfmt_is_key) is left to the pure-Python core too. */
PyObject *json_format_logfmt(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
