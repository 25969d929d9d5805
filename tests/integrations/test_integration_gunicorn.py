"""gunicorn with ``--logger-class boundlog.gunicorn.Logger``: its access log written by boundlog.

The application (tests/apps/bare_wsgi.py) does no logging of its own: every line comes
from the logger class, configured only through gunicorn's options and the BOUNDLOG_*
environment variables.  The master builds the log and forks two workers, each of which
must get a writer of its own and drain it when it exits after SIGTERM.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from gunicorn.config import Config

from _servers import (
    CLIENT_TIMEOUT,
    HOLD_UNTIL_CLOSE,
    LOOPBACK,
    NAMED_FIELDS,
    PYTHON,
    SERVER_TZ,
    STOP_TIMEOUT,
    PipeReader,
    build_exchanges,
    check_drained_on_stop,
    check_log,
    poll_until,
    read_log_lines,
    running_server,
    running_server_with_stdout,
    send_exchanges,
    stop_gracefully,
)
from boundlog.gunicorn import Logger

REQUESTS = 150
APP = "tests.apps.bare_wsgi:app"
# Server hooks that show when a worker has started, and can hold it as it starts.
BOOT_HOOKS = "python:tests.apps.gunicorn_boot_hooks"


# The policy every integration test's log follows (see tests/apps/__init__.py), in the
# environment variables the logger reads.
POLICY_ENVIRONMENT = {"BOUNDLOG_SKIP_PATHS": "/healthz", "BOUNDLOG_TRUSTED_PROXIES": "127.0.0.1"}


def gunicorn_command(
    *options: str, logger_class: str = "boundlog.gunicorn.Logger"
) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "--logger-class", logger_class,
            "-b", f"{LOOPBACK}:{port}", "-w", "2", "--graceful-timeout", "10",
            "--log-level", "warning", *options, APP,
        ]  # fmt: skip

    return command


def group_processes(leader: int) -> list[int]:
    """The live processes of the process group ``leader`` leads (gunicorn's master and workers)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The fields after the parenthesised command name: state, ppid, pgrp, ...
        fields = stat.rpartition(")")[2].split()
        if int(fields[2]) == leader and fields[0] != "Z":
            members.append(int(entry))
    return members


def open_files(pid: int) -> set[str]:
    """The paths the descriptors of ``pid`` point to."""
    paths = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        # A descriptor may close between listing and reading it.
        with contextlib.suppress(OSError):
            paths.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return paths


@pytest.mark.parametrize(
    ("worker_class", "log_format", "preload"),
    [("gthread", "combined", False), ("sync", "json", True)],
    ids=["gthread-combined", "sync-json-preload"],
)
def test_every_request_is_logged_once_with_exact_fields(
    tmp_path: Path, worker_class: str, log_format: str, preload: bool
) -> None:
    """N mixed requests leave exactly N correct lines, all written by the workers' exit drain."""
    exchanges = build_exchanges(REQUESTS)
    log_path = tmp_path / "access.log"
    options = ["-k", worker_class, "--access-logfile", str(log_path)]
    # gunicorn's default template is the combined format; json is chosen by name.
    if log_format == "json":
        options += ["--access-logformat", "json"]
    if preload:
        options.append("--preload")
    environment = {"BOUNDLOG_FLUSH_INTERVAL": HOLD_UNTIL_CLOSE, **POLICY_ENVIRONMENT}
    check_drained_on_stop(
        tmp_path, gunicorn_command(*options), exchanges, log_format, environment=environment
    )


def test_a_custom_format_from_a_subclass_reads_every_record_by_name(tmp_path: Path) -> None:
    """A format object a Logger subclass passes through log_options, reading
    ``record.status``, ``record.path`` and the other fields by name, gets a Record for
    every request."""
    options = ["--access-logfile", str(tmp_path / "access.log")]
    command = gunicorn_command(
        *options, logger_class="tests.apps.named_fields_gunicorn_logger.NamedFieldsLogger"
    )
    environment = {"BOUNDLOG_FLUSH_INTERVAL": HOLD_UNTIL_CLOSE, **POLICY_ENVIRONMENT}
    check_drained_on_stop(
        tmp_path, command, build_exchanges(REQUESTS), NAMED_FIELDS, environment=environment
    )


def test_stdout_sink_shared_by_two_workers_through_a_pipe(tmp_path: Path) -> None:
    """With --access-logfile -, both workers write whole lines to the one stdout pipe."""
    exchanges = build_exchanges(REQUESTS, seed=7)
    command = gunicorn_command("-k", "gthread", "--threads", "4", "--access-logfile", "-")
    with PipeReader() as pipe:
        with running_server_with_stdout(
            command,
            {"TZ": SERVER_TZ, **POLICY_ENVIRONMENT},
            tmp_path / "gunicorn.err",
            pipe.write_fd,
        ) as server:
            pipe.close_write_end()
            started = time.time()
            send_exchanges(server.port, exchanges)
            finished = time.time()
            stop_gracefully(server)
        pipe.wait_closed()
        check_log(pipe.lines(), exchanges, "combined", started, finished)


def usr1_pending(pid: int) -> bool:
    """Whether a SIGUSR1 sent to ``pid`` waits to be delivered to one of its threads."""
    bit = 1 << (signal.SIGUSR1 - 1)
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    masks = [line.split()[1] for line in status if line.startswith(("SigPnd:", "ShdPnd:"))]
    return any(int(mask, 16) & bit for mask in masks)


def test_usr1_after_renaming_the_log_moves_new_lines_to_a_new_file(tmp_path: Path) -> None:
    """After logrotate-style rename and SIGUSR1, every process writes to a new file at the path."""
    log_path = tmp_path / "access.log"
    rotated_path = tmp_path / "access.log.1"
    ready = tmp_path / "ready"
    ready.mkdir()
    before, after = build_exchanges(40, seed=1), build_exchanges(40, seed=2)
    command = gunicorn_command("-k", "gthread", "-c", BOOT_HOOKS, "--access-logfile", str(log_path))
    environment = {"TZ": SERVER_TZ, "READY_DIR": str(ready), **POLICY_ENVIRONMENT}
    logged_before = sum(exchange.logged for exchange in before)
    with running_server(command, environment, tmp_path / "gunicorn.out") as server:
        # A worker still starting has not installed its SIGUSR1 handler yet (see the
        # next test): both have before the log is rotated.
        poll_until(lambda: len(list(ready.iterdir())) == 2, 10, "both workers started")
        started = time.time()
        send_exchanges(server.port, before)
        poll_until(
            lambda: log_path.read_bytes().count(b"\n") == logged_before, 10, "the first lines"
        )
        log_path.rename(rotated_path)
        os.kill(server.process.pid, signal.SIGUSR1)

        def everyone_reopened() -> bool:
            processes = group_processes(server.process.pid)
            # The master and both workers each have a log of their own to reopen.
            return len(processes) == 3 and all(
                str(log_path) in files and str(rotated_path) not in files
                for files in map(open_files, processes)
            )

        poll_until(everyone_reopened, 10, "every gunicorn process reopens the access log")
        send_exchanges(server.port, after)
        finished = time.time()
        stop_gracefully(server)
    check_log(read_log_lines(rotated_path), before, "combined", started, finished)
    check_log(read_log_lines(log_path), after, "combined", started, finished)


def test_a_worker_that_missed_usr1_while_starting_writes_to_the_new_file(
    tmp_path: Path,
) -> None:
    """A SIGUSR1 that reaches a worker before it installed its handler is lost there (as
    for gunicorn's own logger, which then writes to the rotated file for good): the
    worker's first batch still goes to the file at the path."""
    log_path = tmp_path / "access.log"
    rotated_path = tmp_path / "access.log.1"
    ready = tmp_path / "ready"
    ready.mkdir()
    exchanges = build_exchanges(40, seed=3)
    command = gunicorn_command("-k", "gthread", "-c", BOOT_HOOKS, "--access-logfile", str(log_path))
    gate, opener = os.pipe()
    environment = {
        "TZ": SERVER_TZ, "READY_DIR": str(ready), "BOOT_GATE_FD": str(gate),
        **POLICY_ENVIRONMENT,
    }  # fmt: skip
    try:
        with running_server(
            command, environment, tmp_path / "gunicorn.out", pass_fds=(gate,)
        ) as server:
            master = server.process.pid
            poll_until(lambda: len(group_processes(master)) == 3, 10, "two workers")
            workers = set(group_processes(master)) - {master}
            # Both workers wait at the gate, in post_fork: logrotate moves the file and
            # the signal the master would forward reaches them there.
            log_path.rename(rotated_path)
            for worker in workers:
                os.kill(worker, signal.SIGUSR1)
            poll_until(lambda: not any(map(usr1_pending, workers)), 10, "the workers get SIGUSR1")
            os.write(opener, b"x" * len(workers))
            poll_until(lambda: len(list(ready.iterdir())) == 2, 10, "both workers started")
            started = time.time()
            send_exchanges(server.port, exchanges)
            finished = time.time()
            stop_gracefully(server)
    finally:
        os.close(gate)
        os.close(opener)
    assert rotated_path.read_bytes() == b""
    check_log(read_log_lines(log_path), exchanges, "combined", started, finished)


def test_reload_on_hup_replaces_the_log_and_loses_no_line(tmp_path: Path) -> None:
    """After SIGHUP the old workers drain their logs as they stop, the new ones log afresh."""
    log_path = tmp_path / "access.log"
    before, after = build_exchanges(40, seed=5), build_exchanges(40, seed=6)
    command = gunicorn_command("-k", "gthread", "--access-logfile", str(log_path))
    environment = {
        "BOUNDLOG_FLUSH_INTERVAL": HOLD_UNTIL_CLOSE,
        "TZ": SERVER_TZ,
        **POLICY_ENVIRONMENT,
    }
    with running_server(command, environment, tmp_path / "gunicorn.out") as server:
        master = server.process.pid
        poll_until(lambda: len(group_processes(master)) == 3, 10, "two workers")
        old_workers = set(group_processes(master)) - {master}
        started = time.time()
        send_exchanges(server.port, before)
        os.kill(master, signal.SIGHUP)

        def replaced() -> bool:
            processes = set(group_processes(master))
            return len(processes) == 3 and not processes & old_workers

        poll_until(replaced, 20, "gunicorn replaces both workers")
        # The old workers wrote their held lines when they exited.
        assert len(read_log_lines(log_path)) == sum(exchange.logged for exchange in before)
        send_exchanges(server.port, after)
        finished = time.time()
        stop_gracefully(server)
    check_log(read_log_lines(log_path), [*before, *after], "combined", started, finished)


def test_custom_atom_template_writes_header_atoms_escaped(tmp_path: Path) -> None:
    """A custom --access-logformat writes gunicorn's atoms, request and response header
    fields included, with what the client sent escaped and the password never shown."""
    log_path = tmp_path / "access.log"
    template = (
        '%(h)s "%(r)s" %(s)s %(B)s %(u)s "%({x-request-id}i)s" "%({content-length}o)s" '
        '"%(a)s" %(D)s'
    )
    options = ["-k", "gthread", "--access-logfile", str(log_path), "--access-logformat", template]
    alice = "Basic " + base64.b64encode(b"alice:secret").decode()
    requests = [
        ("GET", "/bytes/5?n=1", {"X-Request-ID": "id-1", "Authorization": alice}),
        ("GET", "/no/such/page", {"X-Request-ID": 'q"uote\\'}),
        ("HEAD", "/bytes/7", {}),
    ]
    with running_server(gunicorn_command(*options), {}, tmp_path / "gunicorn.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            for method, target, headers in requests:
                client.request(method, target, headers={"User-Agent": "t/1", **headers})
        stop_gracefully(server)
    lines = read_log_lines(log_path)
    assert all(re.fullmatch(rb'.* "t/1" \d+', line) for line in lines), lines
    assert sorted(line.rpartition(b" ")[0] for line in lines) == sorted(
        [
            b'127.0.0.1 "GET /bytes/5?n=1 HTTP/1.1" 200 5 alice "id-1" "5" "t/1"',
            b'127.0.0.1 "GET /no/such/page HTTP/1.1" 404 10 - "q\\x22uote\\x5c" "10" "t/1"',
            b'127.0.0.1 "HEAD /bytes/7 HTTP/1.1" 200 0 - "-" "7" "t/1"',
        ]
    )


def test_the_default_format_shows_the_basic_auth_user_as_gunicorn_does(tmp_path: Path) -> None:
    """gunicorn's default --access-logformat writes the user of Basic credentials in its
    third field (never the password), as gunicorn's own logger does, and - without."""
    log_path = tmp_path / "access.log"
    options = ["-k", "gthread", "--access-logfile", str(log_path)]
    alice = "Basic " + base64.b64encode(b"alice:secret").decode()
    with running_server(gunicorn_command(*options), {}, tmp_path / "gunicorn.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            client.get("/bytes/5", headers={"Authorization": alice})
            client.get("/bytes/6")
        stop_gracefully(server)
    lines = sorted(read_log_lines(log_path), key=lambda line: b"/bytes/6" in line)
    assert [line.split(b" ")[:3] for line in lines] == [
        [b"127.0.0.1", b"-", b"alice"],
        [b"127.0.0.1", b"-", b"-"],
    ]
    assert not any(b"secret" in line for line in lines)


@pytest.mark.parametrize(
    "log_format",
    [Config().access_log_format, '%(t)s "%(r)s" %(s)s'],
    ids=["gunicorn-default", "template"],
)
def test_utc_asked_by_a_subclass_applies_to_templates_too(tmp_path: Path, log_format: str) -> None:
    """A subclass whose log_options ask for UTC gets UTC times whether the format is
    gunicorn's default or a template of atoms, in a server whose local zone is not UTC."""
    log_path = tmp_path / "access.log"
    command = gunicorn_command(
        "--access-logfile", str(log_path), "--access-logformat", log_format,
        logger_class="tests.apps.utc_gunicorn_logger.UtcLogger",
    )  # fmt: skip
    with running_server(command, {"TZ": SERVER_TZ}, tmp_path / "gunicorn.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            client.get("/bytes/3")
        stop_gracefully(server)
    [line] = read_log_lines(log_path)
    assert re.search(
        rb"\[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000\] \"GET /bytes/3 HTTP/1.1\" 200", line
    ), line


def test_without_access_logfile_no_access_line_is_written(tmp_path: Path) -> None:
    """Like gunicorn's own logger, the logger writes no access log unless one is named."""
    exchanges = build_exchanges(30)
    with running_server(
        gunicorn_command("--log-level", "info"), {}, tmp_path / "gunicorn.out"
    ) as server:
        send_exchanges(server.port, exchanges)
        stop_gracefully(server)
        output = server.output()
    assert "Booting worker" in output, "gunicorn's error log must still be written"
    assert "/bytes/" not in output
    assert list(tmp_path.iterdir()) == [tmp_path / "gunicorn.out"]


@pytest.mark.parametrize("worker", ["sync", "gthread"])
def test_a_body_that_raises_before_its_first_piece_is_one_line_with_gunicorns_500(
    tmp_path: Path, worker: str
) -> None:
    """gunicorn calls the logger twice for such a request (its own logger writes two
    lines, the first with the application's 200): one line, with the 500 it answers."""
    log_path = tmp_path / "access.log"
    command = gunicorn_command("-k", worker, "-w", "1", "--access-logfile", str(log_path))
    paths = ["/raise-in-body", "/raise", "/bytes/3", "/raise-in-body"]
    with running_server(command, {}, tmp_path / "gunicorn.out") as server:
        statuses = [
            httpx.get(f"{server.base_url}{path}", timeout=CLIENT_TIMEOUT).status_code
            for path in paths
        ]
        server.stop()
    assert statuses == [500, 500, 200, 500]
    lines = read_log_lines(log_path)
    assert [line.split(b'"')[1].split()[1].decode() for line in lines] == paths, lines
    assert [int(line.split(b'"')[2].split()[0]) for line in lines] == statuses, lines


@pytest.mark.parametrize(
    "spec", ["stdout", "stderr", "-", "otlp", "tcp://127.0.0.1:9", "logging:gunicorn.access"]
)
def test_an_access_logfile_that_names_no_file_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    """gunicorn's own setup opens --access-logfile as a file unless it is "-": for what
    boundlog sends elsewhere it made an empty file of that name in the working directory
    (or failed to start where a directory had that name)."""
    monkeypatch.chdir(tmp_path)
    cfg = Config()
    cfg.set("accesslog", spec)
    logger = Logger(cfg)
    assert logger.boundlog is not None
    logger.boundlog.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--access-logformat", '%(h)s "%(r)s" %(x)s'],
            "--access-logformat: unknown atom %(x)s at position 14",
        ),
        (["--access-logformat", "apache"], "is neither a format name"),
        (
            ["--env", "BOUNDLOG_MAX_QUEUE=lots"],
            "BOUNDLOG_MAX_QUEUE='lots' is not a whole number: e.g. BOUNDLOG_MAX_QUEUE=10000",
        ),
        (
            ["--env", "BOUNDLOG_MAX_QUEUE=0"],
            "BOUNDLOG_MAX_QUEUE must be a whole number >= 1, not 0: e.g. BOUNDLOG_MAX_QUEUE=10000",
        ),
        (
            ["--env", "BOUNDLOG_FLUSH_INTERVAL=inf"],
            "BOUNDLOG_FLUSH_INTERVAL must be a number of seconds from 0 to 3600, not inf: "
            "e.g. BOUNDLOG_FLUSH_INTERVAL=0.01",
        ),
        (
            ["--env", "BOUNDLOG_FLUSH_INTERVAL=nan"],
            "BOUNDLOG_FLUSH_INTERVAL must be a number of seconds from 0 to 3600, not nan",
        ),
        (
            ["--env", "BOUNDLOG_MAXQUEUE=100"],
            "unknown setting BOUNDLOG_MAXQUEUE (did you mean BOUNDLOG_MAX_QUEUE?): the "
            "BOUNDLOG_* variables are BOUNDLOG_BATCH_SIZE, BOUNDLOG_FLUSH_INTERVAL,",
        ),
        (["--env", "BOUNDLOG_POLICY=block"], "unknown BOUNDLOG_POLICY 'block': choose one of"),
        (
            ["--env", "BOUNDLOG_TRUSTED_PROXIES=10.0.0.0/8,proxy.local"],
            "BOUNDLOG_TRUSTED_PROXIES='10.0.0.0/8,proxy.local': trusted_proxies entry "
            "'proxy.local' is not an IP address or network",
        ),
        (
            ["--env", "BOUNDLOG_PROXY_HEADER=X-Real-IP"],
            "proxy_header 'X-Real-IP' is not a forwarding header boundlog reads",
        ),
    ],
    ids=[
        "unknown-atom",
        "unknown-name",
        "bad-max-queue",
        "zero-max-queue",
        "infinite-flush-interval",
        "nan-flush-interval",
        "misspelt-variable",
        "bad-policy",
        "bad-trusted-proxy",
        "bad-proxy-header",
    ],
)
def test_unusable_configuration_stops_gunicorn_at_startup_with_one_clear_line(
    tmp_path: Path, options: list[str], message: str
) -> None:
    """A configuration boundlog cannot honour is refused before any worker starts."""
    command = gunicorn_command("--access-logfile", str(tmp_path / "access.log"), *options)
    finished = subprocess.run(
        command(1), capture_output=True, timeout=STOP_TIMEOUT, check=False, text=True
    )
    assert finished.returncode == 1, finished.stderr
    assert "Error: boundlog: " in finished.stderr
    assert message in finished.stderr
    assert "Traceback" not in finished.stderr
    assert "Booting worker" not in finished.stderr


@pytest.mark.needs("uvicorn")
def test_uvicorns_worker_class_stops_gunicorn_at_startup_saying_what_to_do(
    tmp_path: Path,
) -> None:
    """uvicorn's worker never calls the logger class: the log would stay empty, silently."""
    command = gunicorn_command(
        "-k", "uvicorn.workers.UvicornWorker", "--access-logfile", str(tmp_path / "access.log")
    )
    finished = subprocess.run(
        command(1), capture_output=True, timeout=STOP_TIMEOUT, check=False, text=True
    )
    assert finished.returncode == 1, finished.stderr
    assert "Error: boundlog: gunicorn's worker class uvicorn.workers.UvicornWorker" in (
        finished.stderr
    )
    assert "wrap the application in boundlog.asgi.AccessLogMiddleware" in finished.stderr
    assert "Booting worker" not in finished.stderr


def test_settings_without_an_access_logfile_are_checked_and_said(tmp_path: Path) -> None:
    """BOUNDLOG_* settings without --access-logfile: no log, and it used to be silent,
    a misspelt variable included."""
    misspelt = gunicorn_command("--env", "BOUNDLOG_MAXQUEUE=100")
    finished = subprocess.run(
        misspelt(1), capture_output=True, timeout=STOP_TIMEOUT, check=False, text=True
    )
    assert finished.returncode == 1, finished.stderr
    assert "unknown setting BOUNDLOG_MAXQUEUE" in finished.stderr
    with running_server(
        gunicorn_command("--env", "BOUNDLOG_POLICY=wait"), {}, tmp_path / "server.out"
    ) as server:
        assert httpx.get(f"{server.base_url}/bytes/1", timeout=CLIENT_TIMEOUT).status_code == 200
        server.stop()
        output = server.output()
    told = [line for line in output.splitlines() if "no --access-logfile" in line]
    assert len(told) == 1, output
    assert "give --access-logfile PATH" in told[0]


@pytest.mark.parametrize(
    ("raw_env", "options"),
    [
        ([], {}),
        (
            ["BOUNDLOG_SKIP_PATHS=/healthz, /static/*", "BOUNDLOG_TRUSTED_PROXIES=10.0.0.0/8"],
            {"skip_paths": ["/healthz", "/static/*"], "trusted_proxies": ["10.0.0.0/8"]},
        ),
        (
            ["BOUNDLOG_TRUSTED_PROXIES=10.0.0.1", "BOUNDLOG_PROXY_HEADER=forwarded"],
            {"trusted_proxies": ["10.0.0.1"], "proxy_header": "forwarded"},
        ),
        (["BOUNDLOG_REDACT_QUERY=key,token"], {"redact_query": ["key", "token"]}),
        (["BOUNDLOG_REDACT_QUERY="], {"redact_query": []}),
        (["BOUNDLOG_REPORT_LOSS=0"], {"report_loss": False}),
    ],
)
def test_policy_options_come_from_the_environment(
    raw_env: list[str], options: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Comma-separated BOUNDLOG_* lists become AccessLog options; an empty one turns off."""
    for variable in (
        "BOUNDLOG_SKIP_PATHS",
        "BOUNDLOG_TRUSTED_PROXIES",
        "BOUNDLOG_PROXY_HEADER",
        "BOUNDLOG_REDACT_QUERY",
        "BOUNDLOG_REPORT_LOSS",
    ):
        monkeypatch.delenv(variable, raising=False)
    cfg = Config()
    cfg.set("raw_env", raw_env)
    assert Logger(cfg).log_options(cfg) == options
