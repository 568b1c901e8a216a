"""Accounts tests run against two small lessons of their own, so they do not depend on the course's content."""

from __future__ import annotations

import pytest

LESSON = """---
title: {title}
slug: {slug}
order: {order}
summary: A lesson for the accounts tests.
estimated_minutes: 5
---

## Start

Some text about tensors and devices.
"""


@pytest.fixture
def settings(settings, tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    for order, (slug, title) in enumerate([("alpha", "Alpha lesson"), ("beta", "Beta lesson")], start=1):
        (lessons / f"{order:02d}-{slug}.md").write_text(LESSON.format(title=title, slug=slug, order=order))
    exercises = tmp_path / "exercises"
    exercises.mkdir()
    return settings.model_copy(update={"lessons_dir": lessons, "exercises_dir": exercises})
