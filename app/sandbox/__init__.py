"""Run untrusted learner code: fork server, per-job isolation, limits, output capture.

Imported by the fork server and (through app.sandbox.harness) inside every job, so it stays tiny: the limits
dataclass and a lazy `doctor`.
"""

from __future__ import annotations

from app.sandbox.limits import Limits


def doctor(settings) -> dict:
    """Start the sandbox, run a probe job, and return the report `course doctor` prints."""
    from app.sandbox.doctor import doctor as run_doctor

    return run_doctor(settings)


__all__ = ["Limits", "doctor"]
