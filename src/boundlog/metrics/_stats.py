"""The counters an access log reports."""

from __future__ import annotations

from typing import NamedTuple


class Stats(NamedTuple):
    """An immutable snapshot of an access log's counters.

    Every record handed to ``submit`` ends in exactly one of ``written``, ``dropped``,
    ``filtered`` and ``failed``; after ``close()`` returns, ``submitted == written +
    dropped + filtered + failed`` holds exactly.  Before that, the difference is
    ``queued`` plus the batch the writer holds.
    """

    #: Records handed to the log, accepted or not.
    submitted: int
    #: Records whose line reached the sink.
    written: int
    #: Records refused at admission: the queue was full (``drop``), the log was closed,
    #: or a submitter stopped waiting for room (``wait``: a cancelled request).
    dropped: int
    #: Records the log's filters (``skip_paths``, ``skip_status``, ``min_duration``,
    #: ``sample``, ``keep``) chose not to write.
    filtered: int
    #: Records accepted but lost because the sink failed, their format failed, or close
    #: timed out.
    failed: int
    #: Write and reopen attempts the sink refused (one per failed batch, whatever its
    #: size); for a network sink, each connection or send attempt that failed and was
    #: retried.
    write_errors: int
    #: Bytes of log lines the sink accepted.
    bytes_written: int
    #: Batches written (one write call each, or a few to respect PIPE_BUF on pipes).
    batches: int
    #: Records waiting in the queue when the snapshot was taken.
    queued: int
    #: The most records seen waiting at once: by the writer, by a snapshot, by a
    #: submitter waiting for room, or ``max_queue`` when a record was refused as full.
    queue_peak: int
