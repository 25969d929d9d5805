"""`boundlog bench`: its parts, every server and logger it drives, and short real runs."""

from __future__ import annotations

import ast
import asyncio
import http.client
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults
from wsgiref.validate import validator

import pytest

import boundlog.bench
from _records import make_record
from _servers import free_port, poll_until
from boundlog import AccessLog
from boundlog.bench._asgi import CaptureOnlyMiddleware, FixedBodyApp
from boundlog.bench._breakdown import Breakdown, median_breakdown
from boundlog.bench._checks import Check, delivery_checks
from boundlog.bench._errors import BenchError
from boundlog.bench._loggers import BODY, LoggerConfig
from boundlog.bench._matrix import (
    BOUNDLOG_LOGGERS,
    LOGGERS,
    NETWORK_SINKS,
    PEER_LOGGERS,
    QUICK_LOGGERS,
    QUICK_SERVERS,
    QUICK_SINKS,
    SERVERS,
    SILENT_LOGGERS,
    Cell,
    matrix,
    not_applicable,
    overload_cells,
    rounds,
    skipped,
)
from boundlog.bench._procstat import (
    ThreadTimes,
    cpu_seconds,
    peak_rss_bytes,
    process_tree,
    tree_cpu_seconds,
    tree_peak_rss_bytes,
    tree_threads,
)
from boundlog.bench._report import checks_text, tables
from boundlog.bench._servers import (
    HOST,
    fetch_stats,
    probe,
    server_command,
    start_server,
    wait_until_ready,
)
from boundlog.bench._sinks import FileSink, Sink, open_sink
from boundlog.bench._spawn import spawn, stop
from boundlog.bench._stdlib_server import BenchServer, handler_class, handler_logging
from boundlog.bench._summary import mad_pct, paired_ratio, rps, summarize
from boundlog.bench._syscalls import SyscallCounter, parse_per_thread
from boundlog.bench._trial import TrialResult
from boundlog.bench._wrk import (
    BROWSER_HEADERS,
    WrkResult,
    find_wrk,
    parse_output,
    run_wrk,
    write_script,
)
from boundlog.bench._wsgi import CaptureOnlyMiddleware as CaptureOnlyWsgiMiddleware
from boundlog.bench._wsgi import fixed_body_app

needs_wrk = pytest.mark.skipif(
    shutil.which("wrk") is None,
    reason="wrk is not installed (apt-get install wrk; `make test` installs it)",
)
REQUESTS = 20


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "boundlog.bench", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def test_rounds_rotate_so_that_no_cell_always_runs_first() -> None:
    """Every round runs every cell once, and each round starts with a different cell."""
    cells = matrix(("uvicorn", "gunicorn"), ("none", "default", "boundlog-drop"), ("file",))
    ordered = rounds(cells, 3)
    assert all(sorted(r, key=cells.index) == cells for r in ordered)
    assert len({r[0] for r in ordered}) == 3


def test_overload_cells_throttle_a_pipe_for_both_policies_and_a_baseline() -> None:
    """The overload scenario measures none, drop and wait into a throttled pipe."""
    cells = overload_cells(("uvicorn",), 2000)
    assert [c.logger for c in cells] == ["none", "boundlog-drop", "boundlog-wait"]
    assert all(c.overload and c.sink == "pipe" for c in cells)
    assert cells[1].name == "uvicorn/boundlog-drop/slow-pipe@2000/s"


def _trial(logger: str, round_index: int, requests: int) -> TrialResult:
    result = TrialResult(Cell("uvicorn", logger, "file"), round_index)
    result.wrk = WrkResult(requests, 1_000_000, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return result


def test_ratios_are_paired_by_round() -> None:
    """Each trial is divided by the baseline trial of its own round, then the median taken."""
    baseline = [_trial("none", 0, 1000), _trial("none", 1, 2000), _trial("none", 2, 4000)]
    logged = [_trial("naive", 0, 500), _trial("naive", 1, 1000), _trial("naive", 2, 4000)]
    assert paired_ratio(logged, baseline, rps) == pytest.approx(0.5)


def test_mad_is_in_percent_of_the_median() -> None:
    """The spread is the median absolute deviation over the median, in percent."""
    assert mad_pct([90.0, 100.0, 130.0]) == pytest.approx(10.0)
    assert mad_pct([]) is None


def test_wrk_output_without_a_result_line_is_an_error() -> None:
    """A wrk run whose Lua report is missing fails loudly instead of measuring zero."""
    assert parse_output("BOUNDLOG_BENCH_WRK 1 2 3 4 5 6 7 8 9 10 11\n").max_us == 11
    with pytest.raises(BenchError, match="no result line"):
        parse_output("Running 1s test @ http://127.0.0.1:1/\n")


def test_process_tree_cpu_includes_the_grandchildren() -> None:
    """CPU time and peak RSS are summed over the server's whole process tree."""
    burner = "while True: pass"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burner!r}])"
    root = spawn([sys.executable, "-c", parent], None)
    try:
        wait_for(lambda: len(process_tree(root.pid)) == 2, "the grandchild")
        # The root only waits for its child: the CPU time it adds is the child's.
        wait_for(lambda: tree_cpu_seconds(root.pid) > 0.5, "the grandchild's CPU time")
        assert cpu_seconds(root.pid) < 0.5
        assert tree_peak_rss_bytes(root.pid) > peak_rss_bytes(root.pid) > 0
    finally:
        stop(root, 5)


def test_each_thread_of_the_tree_has_its_own_times_and_switches() -> None:
    """tree_threads reads every thread apart, by its id, with its waits counted."""
    go, went = threading.Event(), threading.Event()
    waiter = threading.Thread(target=lambda: (go.wait(), went.set()))
    waiter.start()
    try:
        before = tree_threads(os.getpid())
        assert threading.get_native_id() in before
        assert waiter.native_id in before
    finally:
        go.set()
        waiter.join()
    # A thread that waited for an event gave up its CPU at least once to do so.
    assert before[waiter.native_id].voluntary >= 1


def test_the_breakdown_splits_the_writer_from_the_server_threads() -> None:
    """The writer's CPU and calls are its own; a thread started in the window counts from zero."""
    before = {1: ThreadTimes(1.0, 0.5, 10, 1), 2: ThreadTimes(0.25, 0.25, 5, 0)}
    after = {
        1: ThreadTimes(3.0, 1.5, 30, 3),  # the server's: +2.0 user, +1.0 system
        2: ThreadTimes(0.75, 0.5, 25, 0),  # the writer: +0.5 user, +0.25 system
        3: ThreadTimes(1.0, 0.0, 4, 2),  # started in the window
    }
    breakdown = Breakdown.between(
        before, after, writer=2, syscalls={1: 3000, 2: 200, 3: 100}, gc_collections=5,
        gc_full_collections=1,
    )  # fmt: skip
    assert breakdown == Breakdown(
        server_user=3.0, server_system=1.0, writer_user=0.5, writer_system=0.25,
        voluntary=44, involuntary=4, syscalls=3300, writer_syscalls=200, gc_collections=5,
        gc_full_collections=1, writer=2,
    )  # fmt: skip
    figures = breakdown.per_request(1000)
    assert figures["server_user_us"] == pytest.approx(3000.0)
    assert figures["writer_system_us"] == pytest.approx(250.0)
    assert figures["switches_per_1k"] == pytest.approx(48.0)
    assert figures["syscalls_per_request"] == pytest.approx(3.3)
    assert figures["writer_syscalls_per_1k"] == pytest.approx(200.0)
    assert figures["gc_per_1k"] == pytest.approx(5.0)
    assert figures["full_gc_per_1k"] == pytest.approx(1.0)
    # Without perf and without a writer, what cannot be known is None, not zero.
    blind = Breakdown.between(
        before, after, writer=None, syscalls=None, gc_collections=None, gc_full_collections=None
    )
    assert blind.writer_user == 0.0
    assert blind.per_request(1000)["syscalls_per_request"] is None
    assert median_breakdown([figures, blind.per_request(1000)])["gc_per_1k"] == 5.0


def test_perf_output_is_read_per_thread() -> None:
    """Commands with dashes keep their thread id; threads perf did not count are left out."""
    text = (
        "# started on Sat Dec  5 12:00:00 2026\n\n"
        "python3-12,1500,,raw_syscalls:sys_enter,1000,100.00,,\n"
        "uv-loop-x-13,25,,raw_syscalls:sys_enter,1000,100.00,,\n"
        "python3-14,<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n"
    )
    assert parse_per_thread(text) == {12: 1500, 13: 25}
    assert parse_per_thread("python3-14,<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n") is None


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed (linux-perf)")
def test_perf_counts_a_processes_system_calls_from_the_moment_it_starts(tmp_path: Path) -> None:
    """Calls made after start() returns are all counted, in the thread that made them."""
    calls = 5000
    with subprocess.Popen(
        [sys.executable, "-c",
         "import os, sys\n"
         "print(os.getpid(), flush=True)\n"
         "sys.stdin.readline()\n"
         f"for _ in range({calls}): os.getppid()\n"
         "print('done', flush=True)\n"
         "sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as child:  # fmt: skip
        assert child.stdin is not None
        assert child.stdout is not None
        pid = int(child.stdout.readline())
        counter = SyscallCounter(tmp_path / "syscalls.csv")
        counter.start([pid])
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        counts = counter.stop()
        child.kill()
    if counts is None:
        pytest.skip("the kernel does not let perf count system calls here")
    assert counts[pid] >= calls


def test_file_sink_window_holds_exactly_the_lines_written_after_it_started(
    tmp_path: Path,
) -> None:
    """Truncating the appended file restarts the count, and the next line lands at 0."""
    sink = FileSink(tmp_path / "access.log")
    try:
        os.write(sink.server_fd, b"warm-up 1\nwarm-up 2\nwarm-up 3\n")
        assert sink.lines() == 3
        sink.start_window()
        os.write(sink.server_fd, b"timed 1\ntimed 2\n")
        assert sink.window_lines() == 2
        assert (tmp_path / "access.log").read_bytes() == b"timed 1\ntimed 2\n"
    finally:
        sink.close(5)


@pytest.mark.parametrize("kind", ["pipe", "tty"])
def test_reader_sinks_count_every_line(kind: str, tmp_path: Path) -> None:
    """The reader process on a pipe or a pseudo terminal counts every line, even throttled."""
    sink = open_sink(kind, tmp_path, None)
    try:
        # At one line a second the reader dawdles over the second burst until released.
        sink.pace(1)
        os.write(sink.server_fd, b"a line\n" * 50)
        os.write(sink.server_fd, b"another line\n" * 50)
        sink.pace(0)
        wait_for(lambda: sink.lines() == 100, "100 lines at the reader")
        sink.start_window()
        os.write(sink.server_fd, b"one more\n")
        wait_for(lambda: sink.window_lines() == 1, "the window's line")
    finally:
        sink.close(10)


def test_pipe_sink_sees_lines_waiting_unread(tmp_path: Path) -> None:
    """A throttled reader leaves lines in the pipe, and the sink knows until they are read."""
    sink = open_sink("pipe", tmp_path, None)
    try:
        sink.pace(1)
        os.write(sink.server_fd, b"first\n")
        wait_for(lambda: sink.lines() == 1, "the first line")
        # 28 KiB: at one line a second the reader takes at most two 4 KiB reads of it.
        os.write(sink.server_fd, b"a line\n" * 4096)
        assert not sink.drained()
        sink.pace(0)
        wait_for(lambda: sink.drained() and sink.lines() == 4097, "the reader to catch up")
    finally:
        sink.close(10)


def _request_count(logger: str, log: bytes) -> int:
    """The lines of ``log`` that record a ``GET /`` answered with 200, in its format."""
    # granian writes its own messages to the same stdout: they are not JSON.
    records = [json.loads(line) for line in log.splitlines() if line.startswith(b"{")]
    if logger == "fapilog":
        # A JSON object a line, its request fields under "data".
        lines = [record["log"] for record in records]
        return sum(
            line["message"] == "request_completed"
            and line["data"]["method"] == "GET"
            and line["data"]["path"] == "/"
            and line["data"]["status_code"] == 200
            for line in lines
        )
    if logger == "otel-batch":
        # A JSON record a line, its body the combined line.
        bodies = [record["body"] for record in records]
        return sum('"GET / HTTP/1.1" 200 1024' in body for body in bodies)
    return log.count(b'"GET / HTTP/1.1" 200')


def test_capture_only_captures_what_a_logger_needs_in_every_kind_of_server() -> None:
    """The floor logger really does a logger's capture: status and body bytes, for ASGI,
    WSGI (through wsgiref.validate) and http.server."""
    asgi = CaptureOnlyMiddleware(FixedBodyApp())
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    asyncio.run(asgi(scope, receive, send))
    assert asgi.captured == (200, len(BODY))
    assert sent[-1]["body"] == BODY

    wsgi = CaptureOnlyWsgiMiddleware(fixed_body_app)
    environ: dict[str, Any] = {"QUERY_STRING": ""}
    setup_testing_defaults(environ)
    started: list[str] = []
    body = validator(wsgi)(environ, lambda status, headers, exc_info=None: started.append(status))
    assert b"".join(body) == BODY
    body.close()  # type: ignore[attr-defined]
    assert wsgi.captured == ("200 OK", len(BODY))
    assert started == ["200 OK"]

    captures: list[tuple[int, int]] = []
    # The handler's thread is a daemon: its last capture is waited for, not assumed.
    finished = threading.Event()

    class RecordingHandler(handler_class(handler_logging(LoggerConfig("capture-only")))):  # type: ignore[misc]
        def finish(self) -> None:
            captures.append(self.captured)  # type: ignore[attr-defined]
            super().finish()
            finished.set()

    server = BenchServer((HOST, 0), RecordingHandler)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    try:
        connection = http.client.HTTPConnection(HOST, server.server_address[1], timeout=30)
        connection.request("GET", "/")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, BODY)
        connection.close()
        assert finished.wait(30), "the handler did not finish the connection"
    finally:
        server.shutdown()
        serving.join()
        server.server_close()
    assert captures == [(200, len(BODY))]


def test_peers_run_under_the_asgi_servers_and_are_skipped_elsewhere() -> None:
    """The peers are ASGI middleware: the matrix leaves them out under gunicorn and
    http.server, and says why, instead of failing those cells."""
    cells = matrix(SERVERS, LOGGERS, ("file",))
    left_out = skipped(SERVERS, LOGGERS, ("file",))
    assert {(c.server, c.logger) for c in left_out} == {
        (server, peer) for server in ("gunicorn", "stdlib") for peer in PEER_LOGGERS
    }
    assert not set(cells) & set(left_out)
    assert len(cells) + len(left_out) == len(SERVERS) * len(LOGGERS)
    assert not_applicable("gunicorn", "fapilog") == "an ASGI middleware: uvicorn and granian only"
    # The quick run shows boundlog beside its peers on uvicorn.
    quick = matrix(QUICK_SERVERS, QUICK_LOGGERS, QUICK_SINKS)
    assert {c.logger for c in quick if c.server == "uvicorn"} >= {"boundlog-drop", *PEER_LOGGERS}


def test_a_peer_short_of_its_lines_is_flagged_beside_its_ratios() -> None:
    """A logger without counters is judged by the lines at the sink: one that lost lines
    says so in its row, next to ratios that flatter it, and in a delivery check; a
    skipped cell gets a row that says why."""
    trials = []
    for logger, lines in (("none", None), ("asgi-logger", 1000), ("otel-batch", 900)):
        trial = _trial(logger, 0, 1000)
        trial.lines = lines
        trials.append(trial)
    cells = [trial.cell for trial in trials]
    summaries = summarize(cells, trials)
    text = tables(summaries, [Cell("gunicorn", "fapilog", "file")])
    assert "| otel-batch (lines missing: 90.0% delivered) |" in text
    assert "| asgi-logger | " in text
    assert "| fapilog | skipped: an ASGI middleware: uvicorn and granian only |" in text
    assert "#### gunicorn · file" in text
    verdicts = {check.subject.split(":")[0]: check.passed for check in delivery_checks(summaries)}
    assert verdicts == {"uvicorn/asgi-logger/file": True, "uvicorn/otel-batch/file": False}


def _server_logger_params() -> list[Any]:
    # Each pair the matrix runs (the peers only under the ASGI servers).  granian, and
    # fapilog's orjson, do not install on a free-threaded CPython.
    params = []
    for cell in matrix(SERVERS, LOGGERS, ("file",)):
        needs = [
            pytest.mark.needs(name)
            for name in (cell.server, cell.logger)
            if name in ("granian", "fapilog")
        ]
        params.append(pytest.param(cell.server, cell.logger, marks=needs, id=cell.name))
    return params


def _start(
    command: list[str], config: LoggerConfig, sink: Sink, tmp_path: Path
) -> subprocess.Popen[bytes]:
    """The server, its stdout on the sink, its stderr in tmp_path/stderr."""
    with (tmp_path / "stderr").open("wb") as stderr:
        process = start_server(command, config, stdout_fd=sink.server_fd, stderr=stderr, cpu=None)
    sink.handed_over()
    return process


def _serve_requests(process: subprocess.Popen[bytes], port: int, stderr: Path) -> None:
    """Once the server is ready (and probed: one request), REQUESTS more, each checked."""
    wait_until_ready(process, port, stderr)
    probe(port)
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    for _ in range(REQUESTS):
        connection.request("GET", "/")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, BODY)
    connection.close()


@pytest.mark.parametrize(("server", "logger"), _server_logger_params())
def test_every_server_serves_the_body_and_logs_each_request(
    server: str, logger: str, tmp_path: Path
) -> None:
    """Each server answers with the fixed body and its logger writes one line per request;
    boundlog's counters are on the stats socket while it runs and in the file after."""
    port = free_port()
    stats_file = tmp_path / "stats.json"
    stats_socket = f"boundlog-test-{os.getpid()}-{port}"
    sink = FileSink(tmp_path / "access.log")
    process = _start(
        server_command(server, logger, port, gunicorn_threads=2),
        LoggerConfig(logger, str(stats_file), stats_socket=stats_socket),
        sink,
        tmp_path,
    )
    try:
        _serve_requests(process, port, tmp_path / "stderr")
        if logger.startswith("boundlog"):
            # gunicorn calls its logger's access() once the response has gone out, so
            # the last request's record may follow its response by a moment.
            poll_until(
                lambda: fetch_stats(stats_socket)["submitted"] == REQUESTS + 1,
                20,
                "the stats socket counts every request",
            )
    finally:
        stopped = stop(process, 20)
    assert stopped, "the server did not stop on SIGTERM"
    log = (tmp_path / "access.log").read_bytes()
    expected = 0 if logger in SILENT_LOGGERS else REQUESTS + 1
    assert _request_count(logger, log) == expected, log[-2000:]
    if logger.startswith("boundlog"):
        stats = json.loads(stats_file.read_bytes())
        assert stats["submitted"] == stats["written"] == REQUESTS + 1


def test_missing_wrk_stops_with_how_to_install_it(tmp_path: Path) -> None:
    """Without wrk the command says how to install it and exits with status 2."""
    completed = bench("--wrk", str(tmp_path / "no-wrk-here"), "--output", "out", cwd=tmp_path)
    assert completed.returncode == 2
    assert "apt-get install wrk" in completed.stderr


@pytest.mark.parametrize(
    ("option", "value"), [("--servers", "nginx"), ("--trials", "0"), ("--sinks", "")]
)
def test_bad_options_are_refused(option: str, value: str, tmp_path: Path) -> None:
    """Unknown names and impossible counts are usage errors, before anything runs."""
    completed = bench(option, value, cwd=tmp_path)
    assert completed.returncode == 2
    assert option in completed.stderr


def test_boundlog_command_offers_bench_and_keeps_version() -> None:
    """`boundlog bench --help` works and `boundlog --version` still does."""
    run = [sys.executable, "-m", "boundlog"]
    version = subprocess.run([*run, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("boundlog ")
    usage = subprocess.run([*run, "--help"], capture_output=True, text=True, check=True)
    assert "bench" in usage.stdout
    bench_usage = subprocess.run(
        [*run, "bench", "--help"], capture_output=True, text=True, check=True
    )
    assert "--full" in bench_usage.stdout
    assert "--connections" in bench_usage.stdout


def test_a_missed_target_says_it_does_not_fail_the_run() -> None:
    met = Check("target", "uvicorn/boundlog-drop/file: delivery_pct >= 100", True, "measured 100")
    missed = Check("target", "uvicorn/boundlog-drop/file: rps >= 2.5", False, "measured 1.67")
    assert "not failed" not in checks_text([met])
    text = checks_text([met, missed])
    assert "- MISS: uvicorn/boundlog-drop/file: rps >= 2.5 (measured 1.67)" in text
    assert "- a MISS is reported, not failed" in text
    assert "the exit status is 1 only for failed trials and accounting checks" in text


@needs_wrk
def test_browser_requests_carry_firefoxs_header_fields(tmp_path: Path) -> None:
    """``--browser``: wrk sends a browser's header fields with every request, as a
    server on loopback that records them reads them."""
    seen: list[dict[str, str]] = []

    class Recording(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append({name: value for name, value in self.headers.items() if name != "Host"})
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), Recording)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        script = write_script(tmp_path, BROWSER_HEADERS)
        url = f"http://{HOST}:{server.server_port}/"
        result = run_wrk(find_wrk("wrk"), url, seconds=1, connections=1, script=script, cpu=None)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert result.requests > 0
    assert seen
    assert all(headers == dict(BROWSER_HEADERS) for headers in seen)
    with pytest.raises(ValueError, match="not a header text"):
        write_script(tmp_path, [("User-Agent", "caf\xe9")])


@needs_wrk
def test_short_run_prints_the_table_and_writes_the_artifacts(tmp_path: Path) -> None:
    """A real run of one server, two loggers, one sink and one short trial, end to end."""
    completed = bench(
        "--servers", "uvicorn", "--loggers", "none,boundlog-drop", "--sinks", "file",
        "--trials", "1", "--duration", "1", "--warmup", "1", "--output", "out", "--syscalls",
        "--browser", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert "[1/2] round 1/1  uvicorn/" in completed.stderr
    assert "requests with a browser's 14 header fields" in completed.stdout
    assert " left" in completed.stderr
    assert "#### uvicorn · file" in completed.stdout
    assert "| boundlog-drop |" in completed.stdout
    assert "req/s vs none" in completed.stdout
    assert "#### where the CPU goes: uvicorn · file" in completed.stdout
    # Why a delivery above 100% is no error, said beside the figure.
    assert "delivery can pass 100%: wrk counts the responses it read" in completed.stdout
    out = tmp_path / "out"
    [artifact] = out.glob("bench-*.json")
    document = json.loads(artifact.read_text())
    assert document["environment"]["cpu_model"]
    assert document["environment"]["packages"]["uvicorn"]
    trials = {trial["cell"]["logger"]: trial for trial in document["trials"]}
    assert set(trials) == {"none", "boundlog-drop"}
    for trial in trials.values():
        assert trial["error"] is None
        assert trial["wrk"]["requests"] > 0
        assert trial["cpu_seconds"] > 0
        assert trial["peak_rss_bytes"] > 0
    logged = trials["boundlog-drop"]
    # The writer is found by its name and its CPU kept apart; the collector is read.
    # (Its CPU in a 1 s window may be under /proc's 10 ms tick: not asserted.)
    assert logged["breakdown"]["writer"] is not None
    assert trials["none"]["breakdown"]["writer"] is None
    assert trials["none"]["breakdown"]["writer_user"] == 0
    assert all(trial["breakdown"]["gc_collections"] is not None for trial in trials.values())
    if logged["breakdown"]["syscalls"] is not None:  # perf counts here (see the test above)
        # Every request is a read and a write at least, and the writer writes.
        assert logged["breakdown"]["syscalls"] >= 2 * logged["wrk"]["requests"]
        assert logged["breakdown"]["writer_syscalls"] > 0
    logged_figures = logged["breakdown_per_request"]
    assert logged_figures["server_user_us"] > 0
    assert logged_figures["switches_per_1k"] > 0
    assert logged["lines"] == logged["stats_after"]["written"] - logged["stats_before"]["written"]
    final = logged["final_stats"]
    assert final["submitted"] == final["written"] + final["dropped"]
    assert all(check["passed"] for check in document["checks"] if check["kind"] == "accounting")
    assert list(out.glob("bench-*.md"))
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert bool(list(out.glob("bench-*.png"))) == has_matplotlib
    assert not list(out.glob(".work-*")), "the run left its working folder behind"


@needs_wrk
def test_overload_run_accounts_for_every_record(tmp_path: Path) -> None:
    """Into a throttled pipe, wait delivers every line and drop counts every record it drops."""
    completed = bench(
        "--servers", "uvicorn", "--loggers", "none", "--sinks", "devnull", "--overload",
        "--reader-rate", "500", "--trials", "1", "--duration", "1",
        "--overload-duration", "2", "--warmup", "0", "--output", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert "#### overload: uvicorn, pipe read at 500 lines/s" in completed.stdout
    [artifact] = (tmp_path / "out").glob("bench-*.json")
    trials = {t["cell"]["name"]: t for t in json.loads(artifact.read_text())["trials"]}
    for policy in ("drop", "wait"):
        trial = trials[f"uvicorn/boundlog-{policy}/slow-pipe@500/s"]
        assert trial["error"] is None
        final = trial["final_stats"]
        assert final["submitted"] == final["written"] + final["dropped"]
        assert final["failed"] == 0
        submitted = trial["stats_after"]["submitted"] - trial["stats_before"]["submitted"]
        assert trial["lines"] + trial["dropped"] == submitted
    wait = trials["uvicorn/boundlog-wait/slow-pipe@500/s"]
    assert wait["dropped"] == 0
    assert wait["lines"] >= wait["wrk"]["requests"]


def _private_boundlog_imports(path: Path) -> list[str]:
    """What one bench module imports from boundlog that is not boundlog's public API."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if module.startswith("."):
                # Within the bench package itself: ``from ._loggers import ...``.
                if node.level == 1:
                    continue
                found.append(module)
            elif module.split(".")[0] == "boundlog" and not module.startswith("boundlog.bench"):
                found += [
                    f"{module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                    or any(part.startswith("_") for part in module.split("."))
                ]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("boundlog._")]
    return found


def test_the_benchmark_uses_only_boundlogs_public_api() -> None:
    """The bench measures what users run: no private module or name of boundlog."""
    package = Path(boundlog.bench.__file__).parent
    private = {
        path.name: names
        for path in sorted(package.glob("*.py"))
        if (names := _private_boundlog_imports(path))
    }
    assert private == {}


def test_only_boundlog_sends_to_a_collector() -> None:
    """The syslog and relp sinks run boundlog's loggers and the baseline; every other
    logger writes to stdout and is skipped there, saying why."""
    cells = matrix(("uvicorn",), LOGGERS, NETWORK_SINKS)
    assert {c.logger for c in cells} == {*BOUNDLOG_LOGGERS, *SILENT_LOGGERS}
    assert not_applicable("uvicorn", "default", "relp") == (
        "writes to stdout: only boundlog's loggers send to a collector"
    )


@pytest.mark.parametrize("kind", NETWORK_SINKS)
def test_collector_sinks_count_what_rsyslogd_writes(kind: str, tmp_path: Path) -> None:
    """A real rsyslogd takes boundlog's messages at the sink's URL; the sink counts them,
    in a window too."""
    sink = open_sink(kind, tmp_path, None)
    try:
        assert sink.url is not None
        assert sink.url.startswith(f"{kind}://127.0.0.1:")
        with AccessLog(sink.url) as log:
            for _ in range(100):
                log.submit(make_record())
        wait_for(lambda: sink.lines() == 100, "100 lines at rsyslogd")
        sink.start_window()
        with AccessLog(sink.url) as log:
            log.submit(make_record())
        wait_for(lambda: sink.window_lines() == 1, "the window's line")
    finally:
        sink.close(10)


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn", "stdlib"])
def test_boundlog_ships_each_request_to_the_collector_sink(server: str, tmp_path: Path) -> None:
    """With a collector sink, each server's boundlog logger sends one message a request
    to rsyslogd, and its final stats say every one was written."""
    port = free_port()
    stats_file = tmp_path / "stats.json"
    sink = open_sink("syslog", tmp_path, None)
    assert sink.url is not None
    try:
        process = _start(
            server_command(
                server, "boundlog-drop", port, gunicorn_threads=2, access_logfile=sink.url
            ),
            LoggerConfig("boundlog-drop", str(stats_file), sink=sink.url),
            sink,
            tmp_path,
        )
        try:
            _serve_requests(process, port, tmp_path / "stderr")
        finally:
            assert stop(process, 20), "the server did not stop on SIGTERM"
        wait_for(lambda: sink.lines() == REQUESTS + 1, "a line a request at rsyslogd")
    finally:
        sink.close(10)
    stats = json.loads(stats_file.read_bytes())
    assert stats["submitted"] == stats["written"] == REQUESTS + 1
