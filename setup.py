"""The build of boundlog's optional C core, boundlog._speedups (see boundlog/_core.py),
from csrc/: outside src/, so that no directory named like the module can be imported
in its place when it is not built.

Everything else is in pyproject.toml.  The extension is optional: without a working C
compiler the build says so in one line and installs the pure-Python package, whose
modules are the reference the C core is tested against.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Every C file under csrc/, in its folders; they include each other by their path from
# csrc/ ("common/buffer.h"), which is on the include path.
SOURCES = sorted(str(path) for path in Path("csrc").rglob("*.c"))
HEADERS = sorted(str(path) for path in Path("csrc").rglob("*.h"))
# gcc and clang: warnings are errors, so that a new one cannot slip in.
UNIX_FLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-std=c11"]
# `make asan` adds the sanitizers here.
EXTRA_FLAGS = os.environ.get("BOUNDLOG_CFLAGS", "").split()


class OptionalBuildExt(build_ext):
    """Builds the extension if it can, and otherwise says so in one line."""

    def build_extension(self, ext: Extension) -> None:
        # Always compiled afresh: objects left in build/ by a build with other flags
        # (make asan's) must not be linked into this one: a few seconds.
        self.force = True
        if self.compiler.compiler_type == "unix":
            ext.extra_compile_args = [*UNIX_FLAGS, *EXTRA_FLAGS]
            ext.extra_link_args = list(EXTRA_FLAGS)
        try:
            super().build_extension(ext)
        except Exception as error:  # a missing compiler, or headers: CCompilerError and others
            # A module an earlier build left in build/ must not be installed instead.
            Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            print(
                f"boundlog: C extension not built ({type(error).__name__}: {error}); "
                "installing the pure-Python core",
                file=sys.stderr,
            )


# CPython only: other implementations use the pure-Python core (as aiohttp and yarl do).
ext_modules = (
    [
        Extension(
            "boundlog._speedups",
            SOURCES,
            include_dirs=["csrc"],
            depends=HEADERS,
            optional=True,
        )
    ]
    if sys.implementation.name == "cpython"
    else []
)

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
