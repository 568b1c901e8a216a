"""What the web routes hold to take submissions and stream them: a Hub. Two exist, one per kind of runner.

    LiveHub   (app/submissions/live.py)      the embedded runner: this process grades, streams from memory, stores
    CeleryHub (app/submissions/tier_hub.py)  the worker tier: this process stores and sends; a worker grades and
                                             stores; events come from the job's Redis stream

app/main.py picks the runner and its hub together (its BACKENDS table); nothing else asks which is in force.
Whichever hub grades, the verdict is stored by app/submissions/finish.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from app.content.exercises import Exercise
from app.models import Submission
from app.runner.base import Runner


class Hub(Protocol):
    """Take a learner's code for grading, stream the run's events, stop with the app."""

    runner: Runner | None  # None: the app has no runner (a test app without its lifespan); routes answer 503

    async def submit(self, *, exercise: Exercise, learner_id: str, code: str, machine: str | None = None) -> str:
        """Store the submission and have it graded on `machine` (a "Run on" choice; None: the exercise's own);
        return its id. Raises Busy (429), Unavailable (503) or
        Rejected (the runner refused the source), storing nothing: a full queue costs the learner no attempt."""
        ...

    def events(self, submission_id: str, *, after: str | None = None) -> AsyncIterator[tuple[str, str, dict]]:
        """Yield the run's (id, kind, data) events after event `after`: output batches, then one verdict."""
        ...

    def running_row(self, submission_id: str) -> Submission | None:
        """The stored row of a run this process is grading now, kept from when it was stored (None: not one of
        this process's running jobs). An event stream's owner check reads it instead of the database."""
        ...

    async def stored(self, learner_id: str) -> None:
        """Return once every verdict this learner has been shown is stored (LiveHub shows one while storing it;
        every request waits here first, app/web/deps.py own_verdicts_stored)."""
        ...

    async def close(self) -> None:
        """The app is stopping: settle what this process holds (LiveHub stores unfinished runs as errors)."""
        ...


__all__ = ["Hub"]
