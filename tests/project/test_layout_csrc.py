"""The C core's shape (csrc/): folders by concept, includes one way, no circle of calls.

``module.c`` and ``module_state.h`` (the module, its state) are at the top; below them
``formats/`` (where a line is formatted), ``selection/`` (the writer's scans before
formatting), ``paths/`` (where a request is captured) and ``sinks/`` (what a sink sends
that is not lines) are independent of each
other, and use ``record/`` (a record as C reads it) and ``common/`` (what any part
uses).  The tests read the ``#include`` lines, and the calls from one file to a
function another file defines, and fail on an include against the layers or on a
circle of calls between files.  The same as tests/project/test_layout.py for src/boundlog.
"""

from __future__ import annotations

import re
from pathlib import Path

CSRC = next(path for path in Path(__file__).resolve().parents if (path / "csrc").is_dir()) / "csrc"

#: Lowest first.  A file may include from its own folder and the layers before it; two
#: folders in one layer are independent of each other.  "module" is csrc/'s top.
LAYERS: list[set[str]] = [
    {"common"}, {"record"}, {"engine"}, {"formats", "selection", "paths", "sinks"}, {"module"}
]  # fmt: skip
#: The one include that goes up: the request paths find their types in the module's
#: state (and the state holds paths/environ.h's names).
UPWARD = {("paths", "module_state.h")}

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)
#: A function defined at the start of a line, its return type on the line before (the
#: style of every file here); ``static`` ones are the file's own.
DEFINITION = re.compile(r"^(?P<before>.*)\n(?P<name>[a-z_][a-z0-9_]*)\(", re.MULTILINE)


def unit_of(path: Path) -> str:
    parts = path.relative_to(CSRC).parts
    return parts[0] if len(parts) > 1 else "module"


def layer_of(unit: str) -> int:
    return next(index for index, units in enumerate(LAYERS) if unit in units)


def code_of(path: Path) -> str:
    """The file's text without comments and string literals."""
    return STRING.sub('""', COMMENT.sub(" ", path.read_text()))


def calls_between_files() -> dict[str, set[str]]:
    """For each .c file, the other .c files whose functions it calls."""
    sources = sorted(CSRC.rglob("*.c"))
    codes = {path: code_of(path) for path in sources}
    defined_in: dict[str, Path] = {}
    for path, code in codes.items():
        for match in DEFINITION.finditer(code):
            if not match["before"].startswith("static"):
                defined_in[match["name"]] = path
    calls: dict[str, set[str]] = {}
    for path, code in codes.items():
        named = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*\(", code))
        calls[str(path.relative_to(CSRC))] = {
            str(defined_in[name].relative_to(CSRC))
            for name in named
            if name in defined_in and defined_in[name] != path
        }
    return calls


def test_every_c_file_is_in_a_folder_of_the_layout() -> None:
    units = {unit_of(path) for path in CSRC.rglob("*.[ch]")}
    unplaced = sorted(unit for unit in units if not any(unit in layer for layer in LAYERS))
    assert not unplaced, f"add these folders to a layer in LAYERS: {unplaced}"
    top = sorted(path.name for path in CSRC.glob("*.[ch]"))
    assert top == ["module.c", "module_state.h"], "csrc/ itself holds only the module"


def test_includes_go_one_way() -> None:
    wrong = []
    for path in sorted(CSRC.rglob("*.[ch]")):
        unit = unit_of(path)
        for included in INCLUDE.findall(path.read_text()):
            assert (CSRC / included).is_file(), f"{path}: {included} is not a path from csrc/"
            other = unit_of(CSRC / included)
            if other == unit or (unit, included) in UPWARD:
                continue
            if layer_of(other) >= layer_of(unit):
                wrong.append(f"{path.relative_to(CSRC)} includes {included}")
    assert not wrong, "includes against the layers:\n" + "\n".join(wrong)


def test_calls_between_files_make_no_circle() -> None:
    calls = calls_between_files()
    circles = []
    for start in calls:
        seen: set[str] = set()
        stack = [start]
        while stack:
            for callee in calls[stack.pop()] - seen:
                seen.add(callee)
                stack.append(callee)
        if start in seen:
            circles.append(start)
    assert not circles, f"these files call back into themselves through others: {circles}"


def test_the_checks_see_includes_and_calls() -> None:
    # The tests above would pass on a tree they could not read: make sure they read one.
    assert "paths/asgi_exchange.c" in calls_between_files()["paths/asgi_middleware.c"]
    assert "formats/escape.c" in calls_between_files()["formats/clf.c"]
    assert "common/buffer.h" in INCLUDE.findall((CSRC / "formats" / "clf.c").read_text())
