"""What a corpus program's run looks like, reduced to what must match between a real CUDA host and the simulation.

Standard library only: the recorder (record.py) imports this on a GPU host where the project is not installed.

An outcome is the program's stdout lines and the exception it ended with (type and first line of its message),
normalised so that what honestly differs between two machines does not count: floating-point numbers (losses,
timings, random values), hexadecimal addresses, and the GPU's name. What stays is what a program does with
devices: which device a tensor reports, dtypes, shapes, counts, booleans, and the errors.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

_FLOAT = re.compile(r"(?<![\w.])-?(?:\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+|nan|inf)(?![\w.])")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
# header lines a program may start with, e.g. `# fidelity: gpus=2`
_META = re.compile(r"^#\s*fidelity:\s*(.*)$")


@dataclass
class Outcome:
    """The comparable part of one run."""

    stdout: list[str] = field(default_factory=list)
    exception: dict | None = None  # {"type": "RuntimeError", "message": "first line"}

    def to_json(self) -> dict:
        return asdict(self)


def normalise(line: str, gpu_name: str | None = None) -> str:
    """One output line without what differs between machines for honest reasons."""
    if gpu_name:
        line = line.replace(gpu_name, "<gpu>")
    return _FLOAT.sub("<f>", _HEX.sub("<hex>", line.rstrip()))


def last_exception(stderr: str) -> dict | None:
    """The exception a Python traceback on stderr ends with: its printed type and its message's first line."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        if line and not line[0].isspace():
            match = _EXCEPTION.match(line)
            if match:
                return {"type": match.group(1), "message": (match.group(2) or "").strip()}
    return None


def outcome_of(stdout: str, stderr: str, gpu_name: str | None = None) -> Outcome:
    """Reduce one run's output to its Outcome."""
    return Outcome(stdout=[normalise(line, gpu_name) for line in stdout.splitlines()],
                   exception=last_exception(stderr))


def metadata(source: str) -> dict:
    """The `# fidelity: key=value ...` settings at the top of a program: `gpus`, the GPUs it needs, and `machine`,
    the machine profile it runs on where that is not a CUDA host (`machine=mac-m3-max`: an Apple silicon Mac)."""
    meta = {"gpus": 1, "machine": None}
    for line in source.splitlines():
        match = _META.match(line.strip())
        if not match:
            if line.strip() and not line.startswith("#"):
                break
            continue
        for item in match.group(1).split():
            key, _, value = item.partition("=")
            if key == "gpus":
                meta["gpus"] = int(value)
            elif key == "machine":
                meta["machine"] = value
    return meta


def differences(expected: dict, actual: Outcome) -> list[str]:
    """What differs between an expected outcome (a JSON file's content) and an actual one; [] when they match."""
    out = []
    want, got = expected.get("stdout", []), actual.stdout
    for i in range(max(len(want), len(got))):
        w, g = (want[i] if i < len(want) else "<no line>"), (got[i] if i < len(got) else "<no line>")
        if w != g:
            out.append(f"stdout line {i + 1}: expected {w!r}, got {g!r}")
    if expected.get("exception") != actual.exception:
        out.append(f"exception: expected {expected.get('exception')}, got {actual.exception}")
    return out
