"""mkdocs hooks (mkdocs.yml): the docstrings' Sphinx roles, shown as plain code.

boundlog's docstrings name classes and functions as Sphinx does (``:class:`Record```),
which mkdocstrings passes through as text: the role is dropped here, the name stays
code, and a leading ``~`` (Sphinx's "last part only") keeps the last part.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj|const):<code>~?([^<]*)</code>")


def _name(match: re.Match[str]) -> str:
    text = match.group(1)
    if match.group(0).split("<code>", 1)[1].startswith("~"):
        text = text.rsplit(".", 1)[-1]
    return f"<code>{text}</code>"


def on_post_page(output: str, **kwargs: Any) -> str:
    return ROLE.sub(_name, output)
