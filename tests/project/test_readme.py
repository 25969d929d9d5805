"""The README's quick starts, run as written, and every relative link of the docs.

Each quick start is taken from README.md's fenced blocks, not copied here: a Python
block whose first line is ``# <name>.py`` is written to that file in an empty
directory, and the command lines are run there for real (with only a loopback address
and a free port added), so a quick start that stops working fails this test.  The one
file the README assumes the reader has, ``myapp.py`` with a WSGI ``app``, is written
by the test.

The link check reads every ``[text](target)`` and ``[name]: target`` of README.md,
CONTRIBUTING.md, CHANGELOG.md and docs/*.md, and checks that each relative target
exists and that each ``#anchor`` names a heading of its file (GitHub's slugs).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    poll_until,
    read_log_lines,
    running_server,
    stop_gracefully,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
# The console scripts (uvicorn, gunicorn) of the Python running the tests.
BIN = str(Path(sys.executable).parent)

MYAPP = """\
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\\n"]
"""

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def readme_blocks(language: str) -> list[str]:
    text = README.read_text()
    return [body for lang, body in FENCE.findall(text) if lang == language]


def readme_file(name: str) -> str:
    """The Python block that starts with ``# <name>``."""
    found = [b for b in readme_blocks("python") if b.startswith(f"# {name}\n")]
    assert len(found) == 1, f"README.md has {len(found)} python blocks for {name}"
    return found[0]


def readme_command(prefix: str) -> list[str]:
    """The one command line of the README's sh blocks that starts with ``prefix``."""
    lines = [
        line
        for block in readme_blocks("sh")
        for line in block.splitlines()
        if line.startswith(prefix)
    ]
    assert len(lines) == 1, f"README.md has {len(lines)} command lines {prefix!r}: {lines}"
    return shlex.split(lines[0])


def in_directory(directory: Path, argv: list[str]) -> Callable[[int], list[str]]:
    """``argv`` run from ``directory`` (running_server starts commands at the root)."""

    def command(port: int) -> list[str]:
        extra = (
            ["--host", LOOPBACK, "--port", str(port)]
            if argv[0] == "uvicorn"
            else ["--bind", f"{LOOPBACK}:{port}"]
        )
        return ["sh", "-c", 'cd "$0" && exec "$@"', str(directory), *argv, *extra]

    return command


def one_request_one_line(
    tmp_path: Path, argv: list[str], files: dict[str, str], clean_exits: tuple[int, ...]
) -> None:
    directory = tmp_path / "project"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    environment = {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    with running_server(
        in_directory(directory, argv), environment, tmp_path / "server.out"
    ) as server:
        response = httpx.get(f"{server.base_url}/", timeout=CLIENT_TIMEOUT)
        assert response.status_code == 200
        stop_gracefully(server, clean_exits)
    lines = read_log_lines(directory / "access.log")
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rb'127\.0\.0\.1 - - \[.+\] "GET / HTTP/1\.1" 200 \d+ "-" "python-httpx/.+"', lines[0]
    ), lines


@pytest.mark.needs("fastapi")
def test_fastapi_under_uvicorn(tmp_path: Path) -> None:
    argv = readme_command("uvicorn ")
    assert argv == ["uvicorn", "main:app", "--no-access-log"]
    one_request_one_line(tmp_path, argv, {"main.py": readme_file("main.py")}, UVICORN_CLEAN_EXITS)


def test_gunicorn_logger_class(tmp_path: Path) -> None:
    argv = _gunicorn("myapp:app")
    assert "--logger-class" in argv
    one_request_one_line(tmp_path, argv, {"myapp.py": MYAPP}, (0,))


def test_wsgi_middleware_under_gunicorn(tmp_path: Path) -> None:
    argv = _gunicorn("wsgi:app")
    assert "--access-logfile" not in argv
    files = {"myapp.py": MYAPP, "wsgi.py": readme_file("wsgi.py")}
    one_request_one_line(tmp_path, argv, files, (0,))


def _gunicorn(target: str) -> list[str]:
    found = [
        shlex.split(line)
        for block in readme_blocks("sh")
        for line in block.splitlines()
        if line.startswith("gunicorn ") and line.endswith(f" {target}")
    ]
    assert len(found) == 1, f"README.md has {len(found)} gunicorn commands for {target}"
    return found[0]


def test_directly(tmp_path: Path) -> None:
    (block,) = [b for b in readme_blocks("python") if "from boundlog import AccessLog, Record" in b]
    result = subprocess.run(
        [PYTHON, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("Stats(submitted=1, written=1, "), result.stdout
    (line,) = (tmp_path / "access.log").read_text().splitlines()
    record = json.loads(line)
    assert (record["method"], record["path"], record["status"]) == ("GET", "/", 200)
    assert record["user_agent"] == "curl/8.5"


def readme_row(server: str) -> list[str]:
    """The code spans of the README's table row for ``server``, in order."""
    (row,) = [line for line in README.read_text().splitlines() if line.startswith(f"| {server} |")]
    return re.findall(r"`([^`]+)`", row)


def run_in(directory: Path, program: str) -> Callable[[int], list[str]]:
    """``program`` run by this Python from ``directory``, with a loopback address and a
    free port as its arguments."""
    (directory / "main.py").write_text(program)
    return lambda port: [
        "sh",
        "-c",
        'cd "$0" && exec "$@"',
        str(directory),
        PYTHON,
        "main.py",
        LOOPBACK,
        str(port),
    ]


# The app the aiohttp row assumes the reader has; the row's code follows it, with only
# a loopback address and a free port added to run_app.
AIOHTTP_APP = """\
import sys
from aiohttp import web

async def hello(request):
    return web.Response(text="hello")

app = web.Application()
app.router.add_get("/", hello)
"""


@pytest.mark.parametrize("variant", ["stdout", "file"])
def test_the_aiohttp_row_runs_as_written(tmp_path: Path, variant: str) -> None:
    imports, run_app, file_class = readme_row("aiohttp")
    assert run_app.startswith("web.run_app(app, access_log_class=")
    if variant == "file":
        run_app = f"web.run_app(app, {file_class})"
    run_app = run_app.replace("(app, ", "(app, host=sys.argv[1], port=int(sys.argv[2]), ", 1)
    command = run_in(tmp_path, f"{AIOHTTP_APP}{imports}\n{run_app}\n")
    with running_server(command, {}, tmp_path / "server.out") as server:
        response = httpx.get(f"{server.base_url}/", timeout=CLIENT_TIMEOUT)
        assert response.status_code == 200
        output = stop_gracefully(server)
    if variant == "file":
        (line,) = read_log_lines(tmp_path / "access.log")
        assert b'"GET / HTTP/1.1" 200 5 ' in line, line
    else:
        (json_line,) = [text for text in output.splitlines() if text.startswith("{")]
        assert json.loads(json_line)["path"] == "/", output


def test_the_http_server_row_runs_as_written(tmp_path: Path) -> None:
    *imports, handler = readme_row("http.server")
    assert handler.startswith("class Handler(")
    (tmp_path / "index.html").write_text("hello")
    program = "\n".join(
        [
            "import sys",
            *imports,
            handler,
            "from http.server import ThreadingHTTPServer",
            "ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()",
        ]
    )
    with running_server(run_in(tmp_path, program), {}, tmp_path / "server.out") as server:
        response = httpx.get(f"{server.base_url}/index.html", timeout=CLIENT_TIMEOUT)
        assert response.status_code == 200
        # The line is written within the flush interval: wait for it, then stop.
        poll_until(
            lambda: (
                (tmp_path / "access.log").exists() and read_log_lines(tmp_path / "access.log") != []
            ),
            10.0,
            "the access line",
        )
        server.kill()
    (line,) = read_log_lines(tmp_path / "access.log")
    assert b'"GET /index.html HTTP/1.1" 200 5 ' in line, line


# -- links ------------------------------------------------------------------------------

DOCUMENTS = sorted(
    [
        REPO_ROOT / "README.md",
        REPO_ROOT / "CONTRIBUTING.md",
        REPO_ROOT / "CHANGELOG.md",
        *(REPO_ROOT / "docs").glob("*.md"),
    ]
)
INLINE_LINK = re.compile(r"\]\(([^)\s]+)\)")
REFERENCE_LINK = re.compile(r"^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


# Sections other branches add, linked before they land: checked once the heading exists.
def without_code(text: str) -> str:
    """The text without fenced blocks and inline code, where ``](`` is not a link."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a markdown file."""
    seen: dict[str, int] = {}
    result = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", path.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def relative_links() -> list[tuple[str, str]]:
    links = []
    for document in DOCUMENTS:
        text = without_code(document.read_text())
        for target in INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text):
            if not re.match(r"[a-z]+:", target):
                links.append((str(document.relative_to(REPO_ROOT)), target))
    return links


def test_the_link_check_finds_links() -> None:
    links = relative_links()
    assert ("README.md", "docs/configuration.md") in links
    assert ("docs/performance.md", "bench/latest.png") in links


@pytest.mark.parametrize(("document", "target"), relative_links())
def test_relative_link_resolves(document: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (REPO_ROOT / document).parent / path if path else REPO_ROOT / document
    assert file.exists(), f"{document}: {target} does not exist"
    if anchor:
        name = str(file.resolve().relative_to(REPO_ROOT))
        assert anchor in anchors(file), f"{document}: no heading for #{anchor} in {name}"
