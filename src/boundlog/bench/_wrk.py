"""Driving wrk, the load generator, and reading its results.

wrk reports through a small Lua ``done`` callback that prints one machine-readable
line, so nothing depends on the layout of its human-readable summary.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._errors import BenchError
from ._spawn import spawn

_MARK = "BOUNDLOG_BENCH_WRK"
_FIELDS = (
    "requests", "duration_us", "bytes", "connect_errors", "read_errors", "write_errors",
    "status_errors", "timeouts", "p50_us", "p99_us", "max_us",
)  # fmt: skip
LUA_SCRIPT = f"""\
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("{_MARK}{" %d" * len(_FIELDS)}\\n",
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""
INSTALL_HINT = (
    "wrk, the load generator, is not installed. Install it with "
    "`sudo apt-get install wrk` (Debian, Ubuntu), `brew install wrk` (macOS) or from "
    "https://github.com/wg/wrk, or name its path with --wrk. "
    "(`make bench` installs it by itself when run as root on Debian or Ubuntu.)"
)
# Generous, so that slow but honest responses (the wait policy under overload) are
# measured instead of being counted as timeouts.
_REQUEST_TIMEOUT = "10s"


@dataclass(frozen=True)
class WrkResult:
    """What wrk measured over one run."""

    requests: int
    duration_us: int
    bytes: int
    connect_errors: int
    read_errors: int
    write_errors: int
    status_errors: int
    timeouts: int
    p50_us: int
    p99_us: int
    max_us: int

    @property
    def socket_errors(self) -> int:
        """Connect, read and write errors and timeouts, as wrk counts them."""
        return self.connect_errors + self.read_errors + self.write_errors + self.timeouts

    @property
    def requests_per_second(self) -> float:
        """Completed responses per second of the run."""
        return self.requests / (self.duration_us / 1e6) if self.duration_us else 0.0


def find_wrk(name: str) -> str:
    """The path of the wrk executable, or a BenchError saying how to install it."""
    path = shutil.which(name)
    if path is None:
        raise BenchError(INSTALL_HINT)
    return path


def parse_output(output: str) -> WrkResult:
    """The result line our Lua script printed, among wrk's other output."""
    for line in output.splitlines():
        if line.startswith(_MARK):
            values = [int(value) for value in line.split()[1:]]
            if len(values) == len(_FIELDS):
                return WrkResult(*values)
    raise BenchError(f"wrk printed no result line:\n{output[-2000:]}")


#: The request header fields Firefox sends for a page reached by a link on the same
#: site (``--browser``), as (name, value): wrk alone sends Host and nothing else, which
#: leaves out what a logger pays for each field of a real request.
BROWSER_HEADERS = (
    ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-GB,en;q=0.5"),
    ("Accept-Encoding", "gzip, deflate, br, zstd"),
    ("Referer", "https://shop.example/catalogue/lamps?page=2"),
    ("Connection", "keep-alive"),
    ("Cookie", "session=4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f; theme=dark; consent=1"),
    ("Upgrade-Insecure-Requests", "1"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-Site", "same-origin"),
    ("Sec-Fetch-User", "?1"),
    ("Priority", "u=0, i"),
)


def _lua_string(text: str) -> str:
    if not text.isascii() or not text.isprintable():
        raise ValueError(f"not a header text wrk's script can carry: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_script(folder: Path, headers: Sequence[tuple[str, str]] = ()) -> Path:
    """Write the Lua script where wrk can read it: the report, and ``headers`` (name,
    value) sent with every request besides wrk's Host."""
    path = folder / "report.lua"
    fields = "".join(
        f"wrk.headers[{_lua_string(name)}] = {_lua_string(value)}\n" for name, value in headers
    )
    path.write_text(fields + LUA_SCRIPT)
    return path


def run_wrk(
    wrk: str,
    url: str,
    *,
    seconds: int,
    connections: int,
    script: Path,
    cpu: int | None,
) -> WrkResult:
    """Load ``url`` for ``seconds`` from one wrk thread pinned to ``cpu``."""
    command = [
        wrk, "--threads", "1", "--connections", str(connections), "--duration", f"{seconds}s",
        "--timeout", _REQUEST_TIMEOUT, "--script", str(script), url,
    ]  # fmt: skip
    process = spawn(command, cpu, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = process.communicate(timeout=seconds + 60)
    except BaseException:
        # Ctrl-C or a hung wrk: it runs in its own session, so nobody else would stop it.
        process.kill()
        process.wait()
        raise
    text = output.decode(errors="replace")
    if process.returncode != 0:
        raise BenchError(f"wrk exited with status {process.returncode}:\n{text[-2000:]}")
    return parse_output(text)


def wrk_version(wrk: str) -> str:
    """wrk's own version line."""
    completed = subprocess.run([wrk, "--version"], capture_output=True, check=False)
    first_line = completed.stdout.decode(errors="replace").partition("\n")[0]
    return first_line.partition(" Copyright")[0].strip()
