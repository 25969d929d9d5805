"""When lines get colour: FORCE_COLOR, NO_COLOR, TERM and whether the sink is a terminal."""

from __future__ import annotations

import pytest

from boundlog.formats._color import use_color


@pytest.mark.parametrize(
    ("environ", "is_terminal", "expected"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"TERM": "xterm-256color"}, True, True),
        ({"TERM": "dumb"}, True, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": "0"}, True, False),  # any non-empty value
        ({"NO_COLOR": ""}, True, True),  # empty is as if unset
        ({"NO_COLOR": ""}, False, False),
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": "3"}, False, True),
        ({"FORCE_COLOR": "true"}, False, True),
        ({"FORCE_COLOR": "1", "TERM": "dumb"}, True, True),
        ({"FORCE_COLOR": ""}, False, False),  # empty is as if unset
        ({"FORCE_COLOR": ""}, True, True),
        ({"FORCE_COLOR": "0"}, True, False),
        ({"FORCE_COLOR": "false"}, True, False),
        ({"FORCE_COLOR": "FALSE"}, True, False),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, True),  # FORCE_COLOR wins
        ({"FORCE_COLOR": "0", "NO_COLOR": "1"}, True, False),
        ({"FORCE_COLOR": "", "NO_COLOR": "1"}, True, False),
    ],
)
def test_environment_and_terminal_decide(
    environ: dict[str, str], is_terminal: bool, expected: bool
) -> None:
    """Each combination of the conventions gives the documented answer."""
    assert use_color(environ, is_terminal=is_terminal) is expected
