"""``boundlog bench``: what access logging costs real servers, measured with wrk.

Run ``boundlog bench --help`` (or ``python -m boundlog.bench --help``); the method is
described in docs/performance.md.  Modules, in the order a run uses them:

* ``_cli``: the options; ``_matrix``: the cells and the rotated order of trials;
* ``_run``: a whole run; ``_trial``: one trial of one cell;
* ``_servers`` starts the servers, which serve ``_asgi``, ``_wsgi`` or
  ``_stdlib_server`` with a logger from ``_loggers`` (boundlog under gunicorn: the
  logger class of ``_gunicorn``);
* ``_sinks`` and ``_reader``: where the lines go and how they are counted;
* ``_wrk``: the load; ``_procstat``: CPU time and memory from /proc;
* ``_summary``, ``_checks``, ``_report``, ``_progress``, ``_environment``: the results.

The package imports nothing itself: server processes import its applications, and
they must not carry the harness in their memory (peak RSS is one of the results).
"""
