"""Server paths out of what learners read: `.../site-packages/torch/nn/modules/module.py` becomes
`torch/nn/modules/module.py`, the standard library's files read `python3.11/json/decoder.py`.

A traceback through torch shows the absolute path of every frame, and with it where the course is installed
(the checkout, the virtual environment, the home of the Python build). The learner needs the module, not the
machine's layout, so everything a learner can read (output lines as they stream, the stored stdout and stderr,
check messages) goes through `scrub` in the process that ran the sandbox, whose paths are those the job saw
(the job's read-only root shows the venv and the standard library at their own paths). `verdict_for_learner`
applies it again when a stored verdict is read, for rows graded before this existed or on another host.
"""

from __future__ import annotations

import functools
import re
import sys
import sysconfig

from app import ROOT


@functools.cache
def _replacements() -> tuple[tuple[str, str], ...]:
    """(absolute prefix, what a learner sees instead), longest prefix first."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    paths = sysconfig.get_paths()
    pairs = {paths["purelib"]: "", paths["platlib"]: "", paths["stdlib"]: version, paths["platstdlib"]: version,
             sys.prefix: "venv", sys.base_prefix: "python", sys.exec_prefix: "venv", str(ROOT): "course"}
    out = []
    for prefix, short in pairs.items():
        if prefix and len(prefix) > 1:
            out.append((prefix.rstrip("/") + "/", f"{short}/" if short else ""))
            out.append((prefix.rstrip("/"), short or "."))
    return tuple(sorted(set(out), key=lambda pair: -len(pair[0])))


@functools.cache
def _pattern() -> re.Pattern:
    return re.compile("|".join(re.escape(prefix) for prefix, _ in _replacements()))


def scrub(text: str) -> str:
    """Return text with this host's installation paths replaced by what a learner may see."""
    if not text or "/" not in text:
        return text
    table = dict(_replacements())
    return _pattern().sub(lambda m: table[m.group(0)], text)


def verdict_for_learner(verdict: dict) -> dict:
    """Return a Verdict JSON dict with scrubbed stdout, stderr and check messages."""
    checks = [{**c, "message": scrub(c.get("message") or "")} for c in verdict.get("checks") or []]
    return {**verdict, "stdout": scrub(verdict.get("stdout") or ""), "stderr": scrub(verdict.get("stderr") or ""),
            "checks": checks}


__all__ = ["scrub", "verdict_for_learner"]
