"""When the reference solution may be shown to a learner who has not passed: the unlock rule, as data.

Written the same way in the course's setting (COURSE_SOLUTION_UNLOCK) and in an exercise's `exercise.yaml`
(`solution_unlock:`, which wins for that exercise):

- `failures:N`: after N counted failed attempts (an attempt that ran nothing new does not count:
  app/learning/attempts.py);
- `deadline`: once the learner's deadline for the exercise has passed (no deadline set: not before a pass);
- `never`: never, not even after a pass (graded work whose solution must not travel).

A pass unlocks it under the first two rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RULE = re.compile(r"^(?:failures:(\d{1,4})|deadline|never)$")


@dataclass(frozen=True)
class UnlockRule:
    kind: str  # "failures", "deadline" or "never"
    after: int = 0  # failures: counted failed attempts that unlock it

    def __str__(self) -> str:
        return f"failures:{self.after}" if self.kind == "failures" else self.kind


def parse_unlock(text: str) -> UnlockRule:
    """Read `failures:N`, `deadline` or `never`; ValueError with the accepted forms otherwise."""
    match = RULE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an unlock rule; write failures:N (after N counted failed attempts), "
                         "deadline (after the learner's deadline) or never")
    if match.group(1) is not None:
        return UnlockRule("failures", int(match.group(1)))
    return UnlockRule(text.strip())


__all__ = ["UnlockRule", "parse_unlock"]
