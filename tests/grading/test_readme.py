"""The README lists every exercise with each of its check ids (docs that keep up with the content)."""

from __future__ import annotations

import pytest

from app.config import ROOT
from app.content.exercises import load_exercises

README = (ROOT / "README.md").read_text(encoding="utf-8")
EXERCISES = load_exercises(ROOT / "exercises")


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_readme_lists_the_exercise_and_its_check_ids(slug):
    rows = [line for line in README.splitlines() if line.startswith(f"| `{slug}` ")]
    assert rows, f"add `{slug}` to the README's table of exercises and checks"
    for check_id in EXERCISES[slug].spec.check_ids:
        assert f"`{check_id}`" in rows[0], f"README: list check `{check_id}` in the row of `{slug}`"
