"""Lessons come in an order a learner can follow: each lesson's prerequisites come before it."""

from __future__ import annotations

from app.content.course import load_course
from app.content.validate import check_lessons
from app.core.config import ROOT
from tests.helpers import small_course


def test_every_lessons_prerequisites_come_before_it():
    course = load_course(ROOT / "lessons", ROOT / "exercises")
    order = {lesson.meta.slug: lesson.meta.order for lesson in course.lessons}
    for lesson in course.lessons:
        for slug in lesson.meta.prerequisites:
            assert order[slug] < lesson.meta.order, f"{lesson.meta.slug} needs {slug}, which comes later"


def test_the_training_loop_comes_before_multi_gpu_and_keeps_its_url():
    course = load_course(ROOT / "lessons", ROOT / "exercises")
    slugs = [lesson.meta.slug for lesson in sorted(course.lessons, key=lambda lesson: lesson.meta.order)]
    assert slugs == ["cpu-gpu-border", "picking-a-device", "training-loop", "will-it-fit",
                 "multi-gpu-and-distributed"]
    multi = next(lesson for lesson in course.lessons if lesson.meta.slug == "multi-gpu-and-distributed")
    assert "training-loop" in multi.meta.prerequisites  # it starts from that lesson's loop


def test_course_check_refuses_a_prerequisite_that_comes_later(tmp_path):
    folder = small_course(tmp_path)
    alpha = folder / "lessons" / "01-alpha.md"
    alpha.write_text(alpha.read_text().replace("order: 1\n", "order: 1\nprerequisites:\n  - beta\n  - gamma\n", 1))
    problems = [str(e) for e in check_lessons(load_course(folder / "lessons", folder / "exercises"))]
    assert any("prerequisite `beta` comes at order 2, not before this lesson (1)" in p for p in problems), problems
    assert any("prerequisite `gamma` is no lesson's slug" in p for p in problems), problems
