"""Facts of a job of several ranks: one `RankFacts` per rank, and the `runs` check across them.

The launcher inside the sandbox (app/harness/launch.py) hands the grader one report whose `ranks` list
holds each rank's own report (the same shape as a one-process job's: outcome, trace, probe) plus the rank's fate:
its exit code or signal, whether it reported at all, and whether the launcher stopped it because another rank
failed first. Checks read each rank's facts; the top of the report stays what every exercise reads (the first
failure's outcome, for `mark_unreached`).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from app.grading.facts import Facts, at, check, first_line
from app.grading.verdict import CheckResult


@dataclass
class RankFacts(Facts):
    """One rank's report, with its place in the group."""

    @property
    def rank(self) -> int:
        return int(self.report.get("rank", 0))

    @property
    def local_rank(self) -> int:
        """LOCAL_RANK (the global rank on one machine, where torchrun --standalone gives local = global)."""
        return int(self.report.get("local_rank", self.rank))

    @property
    def node(self) -> int | None:
        """The simulated machine (GROUP_RANK) on a job of several machines; None on one machine."""
        node = self.report.get("node")
        return None if node is None else int(node)

    @property
    def device(self) -> str:
        """This rank's own GPU: cuda:LOCAL_RANK."""
        return f"cuda:{self.local_rank}"

    @property
    def reported(self) -> bool:
        """Whether the rank finished its report (a rank that crashed hard or was stopped did not)."""
        return bool(self.report.get("reported"))

    @property
    def stopped(self) -> bool:
        """Whether the launcher stopped this rank because another one failed first."""
        return bool(self.report.get("stopped"))

    @property
    def exit_code(self) -> int | None:
        return self.report.get("exit_code")

    @property
    def signal(self) -> int | None:
        return self.report.get("signal")

    @property
    def dist(self) -> dict:
        """What the rank's torch.distributed did at the end (the digest of the parameters it trained)."""
        return self.report.get("dist") or {}

    def label(self) -> str:
        return f"rank {self.rank}"


def ranks_of(facts: Facts) -> list[RankFacts]:
    """Every rank's facts, in rank order (empty for a one-process job)."""
    return [RankFacts(entry) for entry in facts.report.get("ranks") or []]


def first_failure(facts: Facts) -> int | None:
    """The rank that failed first (the launcher's root cause), or None when every rank exited 0."""
    return (facts.report.get("launch") or {}).get("first_failure")


def check_ranks_run(facts: Facts) -> CheckResult:
    """`runs`: every rank exited 0; otherwise name the rank that failed first, and why."""
    ranks = ranks_of(facts)
    if ranks and all(r.exit_code == 0 for r in ranks):
        silent = next((r for r in ranks if not r.reported), None)
        if silent is None:
            return check("runs", True)
        return check("runs", False, f"{silent.label()} ended before the grader could collect its results; do not "
                                    "call `os._exit()` or end the process yourself: let every rank run to its end.")
    root = first_failure(facts)
    failed = next((r for r in ranks if r.rank == root), None) or next(
        (r for r in ranks if r.exit_code != 0), None)
    if failed is None:
        return check("runs", False, "the ranks did not finish.")
    others = [r.rank for r in ranks if r is not failed and r.stopped]
    stopped = (f" The launcher then stopped rank{'s' if len(others) > 1 else ''} "
               f"{', '.join(map(str, others))}, as torchrun does.") if others else ""
    exc = failed.outcome.get("exception")
    if exc:
        return check("runs", False, f"{failed.label()}: {at(exc.get('line'))}{exc['type']}: "
                                    f"{_gist(exc['type'], exc['message'])} (its traceback comes first in the output; "
                                    f"fix that line and run again).{stopped}", exc.get("line"))
    if failed.outcome.get("system_exit"):
        line = failed.outcome.get("exit_line")
        return check("runs", False, f"{failed.label()}: {at(line)}the program stopped itself with "
                                    f"`sys.exit({failed.exit_code!r})`; let it run to its end.{stopped}", line)
    if failed.signal:
        return check("runs", False, f"{failed.label()} was killed by {signal.Signals(failed.signal).name} before it "
                                    f"finished.{stopped}")
    return check("runs", False, f"{failed.label()} exited with code {failed.exit_code}.{stopped}")


def _gist(kind: str, message: str) -> str:
    """The line of an exception's message that says what went wrong: the first, except for NCCL's errors, whose
    first line is where in NCCL and whose last says why ("Duplicate GPU detected : ...")."""
    lines = [line for line in (message or "").strip().splitlines() if line.strip()]
    if kind == "DistBackendError" and lines:
        return lines[-1].strip()
    return first_line(message)
