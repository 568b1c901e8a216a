"""Per-job resource limits."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Limits:
    """What one job may use. Units are in the field names' comments; defaults come from Settings."""

    wall_s: float = 10.0  # seconds of wall clock from the moment the code is handed over
    cpu_s: int = 10  # seconds of CPU, summed over every process and thread of the job
    memory_bytes: int = 1 << 30  # bytes of memory (cgroup limit; address-space rlimit as a backstop)
    pids: int = 64  # processes + threads alive at once
    output_bytes: int = 1 << 20  # bytes of stdout + stderr together
    source_bytes: int = 64 << 10  # bytes of UTF-8 source accepted
    tmpfs_bytes: int = 64 << 20  # bytes of each private tmpfs (/tmp, /var/tmp, /dev/shm); also the max file size

    @classmethod
    def from_settings(cls, settings: Any) -> "Limits":
        """Build the limits in force from a Settings object (its sandbox_* fields)."""
        return cls(**{f.name: getattr(settings, f"sandbox_{f.name}") for f in fields(cls)})

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (sent to the fork server)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Limits":
        """Build limits from to_dict()'s output, ignoring unknown keys."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def for_ranks(self, nproc: int) -> "Limits":
        """The limits of a job of nproc ranks, all of them together (one group, one set of limits).

        Wall clock, CPU seconds (one core), output and tmpfs stay the job's: the ranks share them. Processes and
        memory grow by one job's share per extra rank: every rank is a whole torch process with its own
        threads (gloo's included), so the group would otherwise fail where one process of the same program runs.
        """
        if nproc <= 1:
            return self
        return replace(self, pids=self.pids * nproc, memory_bytes=self.memory_bytes * nproc)
