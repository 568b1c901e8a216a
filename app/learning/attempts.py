"""Attempts that ran nothing new: the unchanged starter, the same code as an earlier attempt, or a file that is not
valid Python (nothing of it ran). They are stored and graded like any other, and shown to the learner, but do not
count toward the solution's unlock and are counted apart from the checks that fail most on the dashboard: five
runs of `pass` are not five tries at the problem.

Decided once, when the submission is stored (`progress.record_submission`), from the code alone, so a regrade
or a changed check never changes it.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache

from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.orm import Session

from app.grading.facts import compiles
from app.grading.syntax import syntax_tree
from app.models import Submission

# why an attempt does not count, as stored in submissions.uncounted, and how the dashboard names it
REASONS = {"starter": "unchanged starter", "repeat": "same code as an earlier attempt", "syntax": "syntax error only"}


def normalized(code: str) -> str:
    """The code as compared: its syntax tree, so that comments, blank lines and spacing are not new code (five runs
    of `pass` with a different comment each are one attempt). Code that does not parse is compared as text, with
    trailing blanks and blank lines at either end dropped.

    The tree is the grader's (app/grading/syntax.py keeps the latest by code and file name; the name only words a
    syntax error, which is not read here), so a submission's code is parsed once for both, not twice."""
    tree = syntax_tree(code)
    try:
        if tree is not None:
            return "ast:" + ast.dump(tree)
    except RecursionError:  # parsed, but nested too deep to print
        pass
    # not Python, or nested past the parser
    return "text:" + "\n".join(line.rstrip() for line in code.splitlines()).strip("\n")


def digest(code: str) -> str:
    """SHA-256 of the normalized code, hex (submissions.code_digest)."""
    return hashlib.sha256(normalized(code).encode("utf-8", "surrogatepass")).hexdigest()


@lru_cache(maxsize=256)
def _starter_digest(starter: str) -> str:
    # an exercise's starter is the same text for every submission: its digest (a parse, a dump of its tree and a
    # hash, ~0.1 ms) is worked out once, not on each attempt's write
    return digest(starter)


# an earlier attempt with the same code, the statement built once (each submission's write asks); rows stored
# before digests existed are compared by their code
_EARLIER = select(Submission.id).where(
    Submission.learner_id == bindparam("learner_id"), Submission.exercise_slug == bindparam("exercise_slug"),
    or_(Submission.code_digest == bindparam("code_digest"),
        and_(Submission.code_digest.is_(None), Submission.code == bindparam("code")))).limit(1)


def uncounted_reason(session: Session, *, learner_id: str, exercise_slug: str, code: str,
                     starter: str | None) -> tuple[str, str | None]:  # fmt: skip
    """Return the code's digest and why this attempt ran nothing new ("starter", "repeat", "syntax"), or None
    when it counts. Call it before the new submission is added (it looks for earlier ones)."""
    code_digest = digest(code)
    if starter is not None and code_digest == _starter_digest(starter):
        return code_digest, "starter"
    earlier = session.execute(_EARLIER, {"learner_id": learner_id, "exercise_slug": exercise_slug,
                                         "code_digest": code_digest, "code": code}).first()
    if earlier is not None:
        return code_digest, "repeat"
    if not compiles(code):
        return code_digest, "syntax"
    return code_digest, None


__all__ = ["REASONS", "normalized", "digest", "uncounted_reason"]
