"""A program's output as the exercise panel shows it: tracebacks with the learner's frames in full and the
frames inside torch or the standard library folded into one line ("… 7 frames inside torch …", expandable).

The same rule runs in the browser on live output (static/js/exercise-output.js); this is the server's copy for
the panel rendered without JavaScript. A frame is a traceback line `  File "<path>", line N, in <name>` (after a
rank prefix such as `[default0]:`, as torchrun's --tee writes them) with the source and caret lines under it,
indented by four more spaces. Paths were made relative by the grader (app/grading/paths.py), so `main.py` is the
learner's file, `torch/...` is torch, `python3.11/...` and `<frozen ...>` are the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FRAME = re.compile(r'^(?P<prefix>\[[^\]\s]+\]:)?  File "(?P<path>[^"]+)", line \d+')
LEARNER_FILE = "main.py"


@dataclass
class Line:
    stream: str
    text: str
    learner: bool = False  # a frame of the learner's own file


@dataclass
class Fold:
    """Consecutive frames outside the learner's code, shown as one line that opens to show them."""

    stream: str
    prefix: str
    owners: list[str] = field(default_factory=list)
    frames: int = 0
    lines: list[Line] = field(default_factory=list)

    @property
    def label(self) -> str:
        where = " and ".join(self.owners)
        return f"{self.prefix}… {self.frames} frame{'s' if self.frames != 1 else ''} inside {where} …"


def frame_owner(path: str) -> str | None:
    """Who a frame's file belongs to: None for the learner's file (or any absolute path), else a library's name."""
    if path == LEARNER_FILE or path.startswith("/"):
        return None
    if path.startswith("<frozen") or re.match(r"python\d", path):
        return "the standard library"
    return path.split("/", 1)[0]


def fold(lines: list[tuple[str, str]]) -> list[Line | Fold]:
    """Group output lines (stream, text) into plain lines and folds of library frames."""
    items: list[Line | Fold] = []
    current: Fold | None = None
    frame_target: tuple[str, list] | None = None  # (prefix, where the lines under a frame go)
    for stream, text in lines:
        match = FRAME.match(text)
        if match:
            prefix, owner = match["prefix"] or "", frame_owner(match["path"])
            if owner is None:
                current = None
                items.append(Line(stream, text, learner=match["path"] == LEARNER_FILE))
                frame_target = (prefix, items)
                continue
            if current is None or current.prefix != prefix or current.stream != stream:
                current = Fold(stream, prefix)
                items.append(current)
            current.frames += 1
            if owner not in current.owners:
                current.owners.append(owner)
            current.lines.append(Line(stream, text))
            frame_target = (prefix, current.lines)
        elif frame_target is not None and text.startswith(frame_target[0] + "    "):
            frame_target[1].append(Line(stream, text))
        else:
            current, frame_target = None, None
            items.append(Line(stream, text))
    return items


def output_items(verdict: dict | None) -> list[Line | Fold]:
    """The stored output of a verdict, stdout then stderr, folded for the panel."""
    if not verdict:
        return []
    lines = [(stream, text) for stream in ("stdout", "stderr") for text in (verdict.get(stream) or "").splitlines()]
    return fold(lines)


__all__ = ["Line", "Fold", "fold", "frame_owner", "output_items"]
