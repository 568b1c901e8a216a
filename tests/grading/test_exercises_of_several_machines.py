"""The exercises of several simulated machines, or of `accelerate launch`, through the real sandbox (both pools):
the solution passes, each wrong answer fails its named check. They have fewer wrong answers than the course's
single-process exercises (test_exercises_on_simulated_gpu.py), one per mistake the exercise teaches."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.config import ROOT

SLUGS = ["two-machines", "accelerate-loop"]
WRONG = [(slug, p) for slug in SLUGS for p in sorted((ROOT / "exercises" / slug / "wrong").glob("*.py"))]


@pytest.mark.parametrize("slug", SLUGS)
def test_solution_passes(grade, exercises, slug):
    verdict = grade(slug, exercises[slug].solution)
    assert verdict.status == "passed", [c for c in verdict.checks if not c.passed]
    assert [c.id for c in verdict.checks] == exercises[slug].spec.check_ids


@pytest.mark.parametrize(("slug", "path"), WRONG, ids=[f"{s}/{p.stem}" for s, p in WRONG])
def test_wrong_answer_fails_its_named_check(grade, slug, path: Path):
    expected = path.read_text().splitlines()[0].split("expect:")[1].strip()
    verdict = grade(slug, path.read_text())
    assert verdict.status == "failed"
    failed = {c.id: c for c in verdict.checks if not c.passed}
    assert expected in failed, verdict.checks
    assert failed[expected].message


def test_the_placement_table_has_every_rank_with_its_machine_and_local_rank(grade, exercises):
    """Not rank 0's alone: each rank's entries, named `rank 3 (node1, local rank 1)`, its batches on its own GPU."""
    verdict = grade("two-machines", exercises["two-machines"].solution)
    labels = [e.rank_label for e in verdict.placement]
    assert list(dict.fromkeys(labels)) == ["rank 0 (node0, local rank 0)", "rank 1 (node0, local rank 1)",
                                           "rank 2 (node1, local rank 0)", "rank 3 (node1, local rank 1)"]
    for entry in verdict.placement:
        if entry.event == "to_device":
            assert entry.device == f"cuda:{entry.rank % 2}", entry.summary
    assert verdict.placement_totals.to_device == sum(e.count for e in verdict.placement if e.event == "to_device")
