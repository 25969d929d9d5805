/* OTLP's LogRecord message (opentelemetry-proto's logs.proto) in protobuf, from a line
 * of the `otel` schema preset as json.loads gives it back: sinks/otlp/_logs.log_record
 * in C, byte for byte.
 *
 * The pure-Python encoder is the reference (tests/speedups/test_speedups_otlp.py holds
 * them equal for any JSON value).  A line holding anything json.loads does not make (a
 * subclass, a key that is not a str, a trace id that is not plain hex), or nested past
 * OTLP_MOST_DEPTH, is left to it. */
#ifndef BOUNDLOG_OTLP_H
#define BOUNDLOG_OTLP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Deeper values than this are left to the pure-Python core. */
#define OTLP_MOST_DEPTH 64

/* otlp_log_record(line, time_ns, observed_ns) -> bytes | None */
PyObject *otlp_log_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
