"""The package's shape: subpackages by concept, imports one way between them.

A record flows server -> integration -> record -> admission -> writer (select, format,
write) -> sink, and the folders say so: ``record/`` (the record and its budget),
``capture/`` (what request paths collect), ``formats/`` and ``selection/`` (what the writer
does with a batch), ``sinks/`` (where bytes go), ``metrics/`` (a log's health seen from
outside) and ``engine/`` (admission, the writer thread, ``AccessLog``).  A subpackage
imports only from the layers below it, so that each can be read without the ones above:
this test reads every module's imports (those made only for type checking excepted, as
annotations may name what is above) and fails on one that goes up or sideways.
"""

from __future__ import annotations

import ast
from pathlib import Path

import boundlog

PACKAGE = Path(boundlog.__file__).parent

#: Lowest first.  A module may import from its own layer and the ones before it; two
#: subpackages in one layer are independent of each other.
LAYERS: list[set[str]] = [
    {"_errors", "_version", "_core", "_options", "_speedups"},
    {"record"},
    {"capture"},
    {"formats", "selection"},
    {"sinks"},
    {"metrics"},
    {"engine"},
    {
        "__init__",
        "__main__",
        "_cli",
        "aiohttp",
        "asgi",
        "bench",
        "django",
        "gunicorn",
        "http_server",
        "wsgi",
    },
]
#: Top-level modules (and ``bench``) may import each other within their layer.
SHARED = LAYERS[0] | LAYERS[-1]


def unit_of(path: Path) -> str:
    """The first component under boundlog/: a subpackage or a top-level module."""
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def layer_of(unit: str) -> int:
    return next(index for index, units in enumerate(LAYERS) if unit in units)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_units(path: Path) -> set[str]:
    """The units a module imports at run time (type-checking-only imports left out)."""
    tree = ast.parse(path.read_text(), str(path))
    package = list(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and is_type_checking(node):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    units: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [*base, *(node.module.split(".") if node.module else [])]
            else:
                names = (node.module or "").split(".")
            if names[0] != "boundlog":
                continue
            if len(names) > 1:
                units.add(names[1])
            else:  # from boundlog import x: x is a unit or a public name of __init__
                units.update(
                    alias.name if any(alias.name in layer for layer in LAYERS) else "__init__"
                    for alias in node.names
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "boundlog":
                    units.add(parts[1] if len(parts) > 1 else "__init__")
    return units


def test_every_module_belongs_to_a_layer() -> None:
    units = {unit_of(path) for path in PACKAGE.rglob("*.py")}
    unplaced = sorted(unit for unit in units if not any(unit in layer for layer in LAYERS))
    assert not unplaced, f"add these to a layer in LAYERS: {unplaced}"


def test_imports_go_one_way() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = unit_of(path)
        for other in imported_units(path) - {unit}:
            if other not in {u for layer in LAYERS for u in layer}:
                continue
            same = layer_of(other) == layer_of(unit)
            if layer_of(other) > layer_of(unit) or (same and not {unit, other} <= SHARED):
                wrong.append(f"{path.relative_to(PACKAGE)} imports {other}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_check_sees_an_import_that_goes_up(tmp_path: Path) -> None:
    # The test above would pass on a tree it could not read: make sure it reads one.
    assert "engine" in imported_units(PACKAGE / "asgi.py")
    assert "record" in imported_units(PACKAGE / "engine" / "_admission.py")
