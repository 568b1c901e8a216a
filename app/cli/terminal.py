"""What the `course` command prints on a terminal: learner text with its control characters made visible.

A learner's program (and any message quoting it: a check's message, an exception's text) may print escape
sequences that clear the operator's screen and scrollback, set a scroll region, conceal text, retitle the pane
(OSC 0), write the clipboard (OSC 52) or hide a link's address (OSC 8). Every CLI printer goes through `echo`,
which shows each C0 and C1 control character except tab and newline as text (`^[` for ESC, `\\x9b` for CSI), so
the operator reads what was printed and the terminal obeys none of it. `--json` output is JSON, escaped already.
"""

from __future__ import annotations

import re

import click

# C0 controls except tab (0x09) and newline (0x0a), DEL, and the C1 controls (U+0080..U+009F)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _shown(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)  # caret notation, as `cat -v` writes it: ESC is ^[, CR is ^M
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}"


def visible(text: str) -> str:
    """Return text with every control character but tab and newline written out visibly."""
    return _CONTROL.sub(_shown, text)


def echo(text: str = "", *, err: bool = False) -> None:
    """Print text (a line of learner output, a message) with its control characters made visible."""
    click.echo(visible(str(text)), err=err)


def echo_output(event) -> None:
    """Print one OutputEvent of a job on stdout or stderr, as the job wrote it, controls made visible."""
    echo(event.line, err=event.stream == "stderr")
