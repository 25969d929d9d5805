"""A log's health seen from outside: its counters, Prometheus and OpenTelemetry
instruments, loss reports.
"""
