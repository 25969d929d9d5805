"""What wires a log together: admission (the bounded queue and its counters), the writer
thread, ``AccessLog``, signals and ``BOUNDLOG_*`` variables.
"""
