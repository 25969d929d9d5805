"""End to end: LoggingSink under real uvicorn and gunicorn, with their own formatters.

Each server runs twice with the same logging configuration (a file handler, the
server's own access formatter): once writing its own access log, for reference, and
once with boundlog writing through a LoggingSink instead.  The same requests must give
the same lines, but for what a record cannot know (uvicorn's client port) and the
time.  gunicorn is configured each way it can be: ``logconfig_dict``,
``--log-config-json`` and ``--log-config`` (a ``logging.config.fileConfig`` file).

docs/integrations.md's uvicorn recipe is run as written: its blocks are read out of the
page (a main.py, a diff of the YAML config and a diff of the command line), and uvicorn
runs the config and command before the change and after it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    REPO_ROOT,
    UVICORN_CLEAN_EXITS,
    Server,
    running_server,
    stop_gracefully,
)

# (method, target): statuses 200, 404, 204 and 500, a query, an escaped path, HEAD.
REQUESTS = [
    ("GET", "/bytes/10"),
    ("GET", "/bytes/3?page=2&sort=name"),
    ("GET", "/no%20such/page"),
    ("POST", "/status/204"),
    ("HEAD", "/bytes/5"),
    ("GET", "/status/500"),
]
UVICORN_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
# The test applications read TESTAPP_SINK when imported; the bare app logs nothing to it.
UNUSED_SINK = {"TESTAPP_SINK": "stderr"}


def dict_config(path: Path, formatter: dict[str, Any], loggers: list[str]) -> dict[str, Any]:
    """A dictConfig writing ``loggers`` to the file ``path`` through ``formatter``."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"access": formatter},
        "handlers": {
            "access": {"class": "logging.FileHandler", "filename": str(path), "formatter": "access"}
        },
        "loggers": {
            name: {"handlers": ["access"], "level": "INFO", "propagate": False} for name in loggers
        },
    }


def send_requests(server: Server) -> None:
    with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
        for method, target in REQUESTS:
            client.request(method, target, headers={"user-agent": "e2e/1", "referer": "/from"})


def served_lines(
    tmp_path: Path,
    name: str,
    command: Callable[[int], list[str]],
    environment: dict[str, str],
    clean_exits: tuple[int, ...],
) -> list[str]:
    with running_server(command, environment, tmp_path / f"{name}.out") as server:
        send_requests(server)
        stop_gracefully(server, clean_exits)
    return (tmp_path / f"{name}.log").read_text().splitlines()


def uvicorn_command(app: str, log_config: Path, *own_log: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "uvicorn", app, "--host", LOOPBACK, "--port", str(port),
            "--lifespan", "on", "--log-config", str(log_config), *own_log,
        ]  # fmt: skip

    return command


def test_uvicorn_access_formatter_writes_the_lines_uvicorn_writes(tmp_path: Path) -> None:
    """uvicorn's AccessFormatter, from a --log-config file, on LoggingSink(message="uvicorn")."""
    formatter = {
        "()": "uvicorn.logging.AccessFormatter",
        "fmt": UVICORN_FORMAT,
        "use_colors": False,
    }
    lines = {}
    for name, app, logger, own_log in [
        ("uvicorn", "tests.apps.asgi_app:application", "uvicorn.access", ()),
        ("boundlog", "tests.apps.logging_app:app", "app.access", ("--no-access-log",)),
    ]:
        # YAML, as docs/integrations.md shows it.
        config = tmp_path / f"{name}.yaml"
        config.write_text(
            yaml.safe_dump(dict_config(tmp_path / f"{name}.log", formatter, [logger]))
        )
        environment = {**UNUSED_SINK, "TESTAPP_LOGGER": logger, "TESTAPP_MESSAGE": "uvicorn"}
        command = uvicorn_command(app, config, *own_log)
        lines[name] = served_lines(tmp_path, name, command, environment, UVICORN_CLEAN_EXITS)
    # A record holds the client's host: uvicorn's line has its port too.
    reference = [re.sub(r"^(INFO: +127\.0\.0\.1):\d+ ", r"\1 ", line) for line in lines["uvicorn"]]
    assert len(reference) == len(REQUESTS)
    assert lines["boundlog"] == reference
    assert reference[1] == 'INFO:     127.0.0.1 - "GET /bytes/3?page=2&sort=name HTTP/1.1" 200 OK'


INTEGRATIONS = REPO_ROOT / "docs" / "integrations.md"
UVICORN_RECIPE = "### Through uvicorn's `--log-config`"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# What the recipe's main.py wraps: uvicorn serves it bare for the reference lines.
BARE_APP = "from tests.apps.asgi_app import application as app\n"


def recipe_blocks(heading: str) -> list[tuple[str, str]]:
    """The (language, body) of each fenced block under ``heading`` in integrations.md."""
    text = INTEGRATIONS.read_text()
    section = text[text.index(heading) + len(heading) :]
    return FENCE.findall(section[: section.index("\n### ")])


def before_and_after(diff: str) -> tuple[str, str]:
    """The two texts a unified diff's body compares."""
    before, after = [], []
    for line in diff.splitlines():
        mark, text = line[:1] or " ", line[1:]
        if mark in " -":
            before.append(text)
        if mark in " +":
            after.append(text)
    return "\n".join(before) + "\n", "\n".join(after) + "\n"


def recipe_command(
    command_line: str, directory: Path
) -> tuple[Callable[[int], list[str]], dict[str, str]]:
    """The command line of the recipe, run in ``directory``: its uvicorn, a free port."""
    words = shlex.split(command_line)
    environment = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        environment[name] = value
    assert words[0] == "uvicorn"
    arguments = [str(directory / word) if word == "logging.yaml" else word for word in words[1:]]

    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "uvicorn", *arguments,
            "--app-dir", str(directory), "--host", LOOPBACK, "--port", str(port),
        ]  # fmt: skip

    return command, environment


def test_the_uvicorn_migration_recipe_keeps_uvicorns_lines(tmp_path: Path) -> None:
    """The blocks of integrations.md's uvicorn recipe, run as written before and after."""
    blocks = recipe_blocks(UVICORN_RECIPE)
    [main] = [body for language, body in blocks if language == "python"]
    config_diff, command_diff = [body for language, body in blocks if language == "diff"]
    configs = before_and_after(config_diff)
    command_lines = [text.strip() for text in before_and_after(command_diff)]
    lines = {}
    for name, config, command_line, app in zip(
        ("uvicorn", "boundlog"), configs, command_lines, (BARE_APP, BARE_APP + main), strict=True
    ):
        directory = tmp_path / name
        directory.mkdir()
        (directory / "main.py").write_text(app)
        logconfig = yaml.safe_load(config)
        logconfig["handlers"]["access"]["filename"] = str(tmp_path / f"{name}.log")
        (directory / "logging.yaml").write_text(yaml.safe_dump(logconfig))
        command, environment = recipe_command(command_line, directory)
        lines[name] = served_lines(
            tmp_path, name, command, {**UNUSED_SINK, **environment}, UVICORN_CLEAN_EXITS
        )
    # After the change the sink comes from the environment, as the recipe says.
    assert command_lines[1].startswith("BOUNDLOG_SINK=")
    reference = [re.sub(r"^(INFO: +127\.0\.0\.1):\d+ ", r"\1 ", line) for line in lines["uvicorn"]]
    assert len(reference) == len(REQUESTS)
    assert lines["boundlog"] == reference
    assert reference[1] == 'INFO:     127.0.0.1 - "GET /bytes/3?page=2&sort=name HTTP/1.1" 200 OK'


# gunicorn's three ways to configure logging, each with the formatter on gunicorn.access.
# The module tells whose record a line is: gunicorn's glogging or boundlog's _logging.
GUNICORN_FORMAT = "%(module)s %(levelname)s %(name)s %(message)s"
INI_CONFIG = """\
[loggers]
keys = root, access

[handlers]
keys = access

[formatters]
keys = access

[logger_root]
level = WARNING
handlers =

[logger_access]
level = INFO
handlers = access
propagate = 0
qualname = gunicorn.access

[handler_access]
class = FileHandler
args = ({path!r},)
formatter = access

[formatter_access]
format = {format}
"""


def gunicorn_log_config(kind: str, path: Path, log: Path) -> list[str]:
    """gunicorn's options configuring logging by ``kind``, from files written next to ``path``."""
    logconfig = dict_config(log, {"format": GUNICORN_FORMAT}, ["gunicorn.access"])
    # gunicorn's defaults give the root logger a handler these replace.
    logconfig["root"] = {"level": "WARNING", "handlers": []}
    if kind == "logconfig_dict":
        config = path.with_suffix(".conf.py")
        config.write_text(f"logconfig_dict = {logconfig!r}\n")
        return ["-c", str(config)]
    if kind == "--log-config-json":
        config = path.with_suffix(".json")
        config.write_text(json.dumps(logconfig))
        return ["--log-config-json", str(config)]
    # A logging.config.fileConfig file.
    config = path.with_suffix(".ini")
    config.write_text(INI_CONFIG.format(path=str(log), format=GUNICORN_FORMAT))
    return ["--log-config", str(config)]


def gunicorn_command(*options: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "-k", "gthread", "--threads", "2", "-w", "1",
            "-b", f"{LOOPBACK}:{port}", *options, "tests.apps.bare_wsgi:app",
        ]  # fmt: skip

    return command


DEFAULT_LINE = '127.0.0.1 - - [time] "GET /bytes/3?page=2&sort=name HTTP/1.1" 200 3 "/from" "e2e/1"'
ATOMS = "%(h)s %(m)s %(U)s %(q)s %(H)s %(s)s %(B)s %({user-agent}i)s %({x-missing}i)s"
ATOMS_LINE = "127.0.0.1 GET /bytes/3 page=2&sort=name HTTP/1.1 200 3 e2e/1 -"


@pytest.mark.parametrize(
    ("kind", "log_format", "line"),
    [
        ("logconfig_dict", (), DEFAULT_LINE),
        ("--log-config-json", (), DEFAULT_LINE),
        ("--log-config", (), DEFAULT_LINE),
        ("--log-config", ("--access-logformat", ATOMS), ATOMS_LINE),
    ],
)
def test_gunicorn_logging_configuration_writes_the_lines_gunicorn_writes(
    tmp_path: Path, kind: str, log_format: tuple[str, ...], line: str
) -> None:
    """gunicorn's logging configuration on gunicorn.access, fed by boundlog's logger class."""
    lines = {}
    for name, logger in [
        ("gunicorn", ()),
        (
            "boundlog",
            ("--logger-class", "boundlog.gunicorn.Logger",
             "--access-logfile", "logging:gunicorn.access"),
        ),
    ]:  # fmt: skip
        options = gunicorn_log_config(kind, tmp_path / name, tmp_path / f"{name}.log")
        command = gunicorn_command(*options, *log_format, *logger)
        lines[name] = [
            # Every field but the time, which differs between the two runs; and the
            # module, apart, which tells whose record it is.
            re.sub(r"\[[^]]+\]", "[time]", text).split(" ", 1)
            for text in served_lines(tmp_path, name, command, {}, (0,))
        ]
    assert {module for module, _ in lines["gunicorn"]} == {"glogging"}
    assert {module for module, _ in lines["boundlog"]} == {"_logging"}
    reference = [rest for _, rest in lines["gunicorn"]]
    assert len(reference) == len(REQUESTS)
    assert [rest for _, rest in lines["boundlog"]] == reference
    assert reference[1] == "INFO gunicorn.access " + line
