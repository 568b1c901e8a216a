"""After-verdict hooks: what else happens once a verdict is stored, whichever way the run ended.

`finish()` (app/submissions/finish.py) calls every hook in AFTER_VERDICT, in order, with the session and the
`Stored` verdict, inside the transaction that stored it: what a hook writes commits with the verdict or not at
all. The learner's progress is the first hook.

Registering one is one line, in the module that defines it or where the app is wired (app/main.py):

    from app.submissions import hooks
    hooks.AFTER_VERDICT.append(send_grade_to_lms)   # def send_grade_to_lms(session, stored) -> None

A hook runs on every writer's thread (the web process, a worker, `course regrade`), so it must be quick and must
not wait on the network: an LMS grade passback writes a row of its own here (an outbox) and sends it elsewhere.
A hook that raises rolls the verdict back with it, so it raises only for what must stop the write. `stored.
regrade_id` tells a regrade's verdict (the learner was not there) from a run's; `stored.submission` is the row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from app.learning import progress
from app.lti.passback import queue_grade

if TYPE_CHECKING:
    from app.submissions.finish import Stored

Hook = Callable[[Session, "Stored"], None]


def record_progress(session: Session, stored: Stored) -> None:
    """The learner's progress: their last activity (a run only: a regrade is not theirs) and a pass.

    A run's pass is dated when it was stored; a regrade's by the code it passed, when the learner submitted it
    (the earliest code known to pass wins, so the order in which a regrade finishes does not matter). A regrade
    gives a pass and never takes one away (app/submissions/regrade.py says why).
    """
    submission = stored.submission
    if stored.regrade_id is None:
        progress.touch(session, submission.learner_id, stored.at)
    if stored.status == "passed":
        at = stored.at if stored.regrade_id is None else submission.created_at
        progress.mark_exercise_passed(session, learner_id=submission.learner_id,
                                      exercise_slug=submission.exercise_slug, at=at)


# in order; finish() runs them all. queue_grade: the LMS grade passback's outbox (app/lti/passback.py), listed
# here rather than appended where it is defined so that every writer (a worker, `course regrade`) has it
AFTER_VERDICT: list[Hook] = [record_progress, queue_grade]


def after_verdict(session: Session, stored: Stored) -> None:
    """Run every after-verdict hook on a stored verdict."""
    for hook in AFTER_VERDICT:
        hook(session, stored)


__all__ = ["AFTER_VERDICT", "Hook", "after_verdict", "record_progress"]
