"""mkdocs hooks (mkdocs.yml): the docstrings' Sphinx roles, shown as plain code; and a
check that the API reference names every public name.

boundlog's docstrings name classes and functions as Sphinx does (``:class:`Record```),
which mkdocstrings passes through as text: the role is dropped here, the name stays
code, and a leading ``~`` (Sphinx's "last part only") keeps the last part.

mkdocstrings leaves out what has no docstring (a constant documented by a ``#:``
comment, before griffe-sphinx read those): the build fails if the reference of
``boundlog`` lacks a name of its ``__all__``.
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.exceptions import PluginError

import boundlog

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj|const):<code>~?([^<]*)</code>")


def _name(match: re.Match[str]) -> str:
    text = match.group(1)
    if match.group(0).split("<code>", 1)[1].startswith("~"):
        text = text.rsplit(".", 1)[-1]
    return f"<code>{text}</code>"


def on_post_page(output: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri == "reference/boundlog.md":
        missing = [
            name
            for name in boundlog.__all__
            if name != "__version__" and f'id="boundlog.{name}"' not in output
        ]
        if missing:
            raise PluginError(
                f"the API reference lacks {', '.join(missing)}: give each a docstring"
            )
    return ROLE.sub(_name, output)
