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
