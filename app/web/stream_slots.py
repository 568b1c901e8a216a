"""How many event streams one learner holds open in this web process: a few per submission, a few more overall.

Each open stream costs a task and, while its run is going, a database read or a blocked Redis read every few
hundred milliseconds; a page needs one per run it shows (a second tab, a reconnect racing the old stream). Past
the caps the next stream is refused with 429 and a sentence, and the streams already open go on. The counts are
per web process: on the worker tier each web server keeps its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import HTTPException

# seconds the page is told to wait before it opens another stream
RETRY_AFTER_S = 5


class StreamSlots:
    """Count the open event streams of each learner, per submission and in all."""

    def __init__(self, *, per_submission: int, per_learner: int) -> None:
        self.per_submission = per_submission
        self.per_learner = per_learner
        self._by_submission: Counter[tuple[str, str]] = Counter()
        self._by_learner: Counter[str] = Counter()

    @contextmanager
    def hold(self, learner_id: str, submission_id: str) -> Iterator[None]:
        """Hold one stream slot while the block runs; 429 with a sentence when the learner has none left."""
        key = (learner_id, submission_id)
        if self._by_submission[key] >= self.per_submission:
            raise self._refusal(f"{self.per_submission} event streams of this run are open already (in other "
                                "tabs or windows)")
        if self._by_learner[learner_id] >= self.per_learner:
            raise self._refusal(f"{self.per_learner} event streams of your runs are open already (in other tabs "
                                "or windows)")
        self._by_submission[key] += 1
        self._by_learner[learner_id] += 1
        try:
            yield
        finally:
            self._by_submission[key] -= 1
            self._by_learner[learner_id] -= 1
            if not self._by_submission[key]:
                del self._by_submission[key]
            if not self._by_learner[learner_id]:
                del self._by_learner[learner_id]

    def open_streams(self, learner_id: str) -> int:
        """Return how many streams the learner holds open now."""
        return self._by_learner[learner_id]

    @staticmethod
    def _refusal(why: str) -> HTTPException:
        return HTTPException(429, f"Too many open streams: {why}. Close one of them, then reload this page.",
                             headers={"Retry-After": str(RETRY_AFTER_S)})
