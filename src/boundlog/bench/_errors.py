"""The one exception the harness raises for problems it can explain."""


class BenchError(Exception):
    """Something stops a trial or the whole run; the message says what and how to fix it."""
