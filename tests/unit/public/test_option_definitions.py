"""Each AccessLog option is defined once, in ``_options.OPTIONS``; what spells it again
for users, editors and type checkers is kept equal to it here.

``AccessLog``'s signature (explicit keywords, for ``help()`` and editors),
``LogOptions`` (the middlewares' ``**options: Unpack[LogOptions]``), ``make_select``'s
keywords, the ``BOUNDLOG_*`` variables, and the options table of
docs/configuration.md.  A type checker then catches a misspelt option where a
middleware is made: the last test runs mypy on one.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ForwardRef

import pytest

import boundlog
from boundlog import AccessLog
from boundlog._options import OPTIONS
from boundlog.engine._environment import SINK_VARIABLE, options_from_environment
from boundlog.engine._log import SELECTION_OPTIONS, LogOptions
from boundlog.selection._filters import make_select

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
#: Rows of the options table that are no AccessLog option: the ASGI and WSGI
#: middlewares' own keyword.
MIDDLEWARE_ONLY = {"request_id"}


def _keywords(function: Any) -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(function).parameters
    return {name: p for name, p in parameters.items() if name != "self"}


def test_accesslogs_keywords_are_the_definitions_in_their_order() -> None:
    keywords = _keywords(AccessLog.__init__)
    assert list(keywords) == list(OPTIONS)
    defaults = {name: parameter.default for name, parameter in keywords.items()}
    assert defaults == {name: option.default for name, option in OPTIONS.items()}


def test_the_middlewares_typed_options_are_accesslogs_keywords() -> None:
    """Same names, and the same annotations (as written: neither is evaluated)."""
    annotations = LogOptions.__annotations__
    assert list(annotations) == list(OPTIONS)
    assert LogOptions.__optional_keys__ == frozenset(OPTIONS)
    written = {
        name: hint.__forward_arg__ if isinstance(hint, ForwardRef) else hint
        for name, hint in annotations.items()
    }
    assert written == {
        name: parameter.annotation for name, parameter in _keywords(AccessLog.__init__).items()
    }


def test_make_selects_keywords_default_to_the_definitions() -> None:
    keywords = _keywords(make_select)
    assert list(keywords) == list(SELECTION_OPTIONS)
    assert {name: p.default for name, p in keywords.items()} == {
        name: OPTIONS[name].default for name in SELECTION_OPTIONS
    }


def test_each_variable_is_named_after_its_option() -> None:
    for name, option in OPTIONS.items():
        assert option.variable in (None, "BOUNDLOG_" + name.upper())
    assert OPTIONS["sink"].variable == SINK_VARIABLE


def test_every_variable_sets_its_option() -> None:
    """Each definition's variable is read, and gives its option a value."""
    examples = {
        "sink": "stderr",
        "format": "json",
        "policy": "wait",
        "max_queue": "7",
        "batch_size": "3",
        "max_record_bytes": "8192",
        "max_queue_bytes": "131072",
        "flush_interval": "0.5",
        "skip_paths": "/healthz",
        "skip_path_errors": "1",
        "websockets": "0",
        "redact_query": "token",
        "trusted_proxies": "10.0.0.0/8",
        "proxy_header": "forwarded",
        "metrics": "0",
        "report_loss": "0",
    }
    with_variables = {name for name, option in OPTIONS.items() if option.variable}
    assert with_variables == set(examples)
    environment = {str(OPTIONS[name].variable): text for name, text in examples.items()}
    options = options_from_environment(environment)
    assert set(options) == with_variables
    assert options["max_queue"] == 7
    assert options["flush_interval"] == 0.5
    assert options["websockets"] is False
    assert options["skip_paths"] == ["/healthz"]
    assert options["skip_path_errors"] is True
    # Under gunicorn's logger class, its command line names the sink and the format.
    del environment["BOUNDLOG_SINK"], environment["BOUNDLOG_FORMAT"]
    assert set(options_from_environment(environment, gunicorn=True)) == with_variables - {
        "sink",
        "format",
    }


def _options_table() -> list[list[str]]:
    """The rows of docs/configuration.md's options table, as cells."""
    text = (DOCS / "configuration.md").read_text()
    header = text.find("| option | default | meaning |")
    assert header >= 0, "docs/configuration.md has no table headed | option | default | meaning |"
    rows = []
    for line in text[header:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def _value_of(cell: str) -> object:
    """What a default cell says: a Python literal, or a name boundlog exports."""
    written = cell.strip("`")
    try:
        return ast.literal_eval(written)
    except ValueError:
        return getattr(boundlog, written)


def _expected_rows() -> str:
    rows = []
    for name, option in OPTIONS.items():
        default = option.default
        shown = next(
            (exported for exported in boundlog.__all__ if getattr(boundlog, exported) is default),
            None,
        )
        if shown is None:
            shown = f'"{default}"' if isinstance(default, str) else repr(default)
        rows.append(f"| `{name}` | `{shown}` | {option.summary}. |")
    return "\n".join(rows)


def test_the_docs_options_table_is_the_definitions() -> None:
    """Names and defaults; on a difference, the rows the definitions give are shown."""
    rows = {row[0].strip("`"): row for row in _options_table()}
    hint = f"\nthe definitions' rows (add the meaning):\n{_expected_rows()}"
    assert set(rows) - MIDDLEWARE_ONLY == set(OPTIONS), hint
    for name, option in OPTIONS.items():
        assert _value_of(rows[name][1]) == option.default, f"default of {name}{hint}"


def test_the_docs_name_every_variable() -> None:
    pages = "".join(page.read_text() for page in sorted(DOCS.glob("*.md")))
    named = set(re.findall(r"BOUNDLOG_[A-Z_]*[A-Z]", pages))
    missing = {str(option.variable) for option in OPTIONS.values() if option.variable} - named
    assert not missing, f"variables the docs do not name: {sorted(missing)}"


_MISSPELT = """
from boundlog.aiohttp import access_logger
from boundlog.asgi import AccessLogMiddleware as AsgiMiddleware
from boundlog.http_server import AccessLogMixin
from boundlog.wsgi import AccessLogMiddleware as WsgiMiddleware


async def asgi_app(scope, receive, send) -> None: ...


def wsgi_app(environ, start_response) -> list[bytes]:
    return []


AsgiMiddleware(asgi_app, max_queue=10, policy="wait")
AsgiMiddleware(asgi_app, max_qeue=10)
WsgiMiddleware(wsgi_app, batch_sise=10)
access_logger(None, flush_intreval=0.5)


class Handler(AccessLogMixin):
    access_log_options = {"skip_path": ["/healthz"]}
"""


@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None, reason="mypy is not installed in this Python"
)
def test_mypy_catches_a_misspelt_option_where_a_middleware_is_made(tmp_path: Path) -> None:
    snippet = tmp_path / "misspelt.py"
    snippet.write_text(textwrap.dedent(_MISSPELT))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--python-version",
            "3.11",
            str(snippet),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    errors = result.stdout
    lines = snippet.read_text().splitlines()

    def line_of(text: str) -> int:
        return next(number for number, line in enumerate(lines, 1) if text in line)

    for misspelt in ("max_qeue", "batch_sise", "flush_intreval"):
        assert re.search(
            rf"misspelt\.py:{line_of(misspelt)}: error: Unexpected keyword argument "
            rf'"{misspelt}"',
            errors,
        ), errors
    assert re.search(rf"misspelt\.py:{line_of('skip_path')}: error: .*skip_path", errors), errors
    # The well-spelt options pass.
    assert f"misspelt.py:{line_of('max_queue=10, ')}:" not in errors, errors
