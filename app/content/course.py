"""The course: every lesson and exercise, loaded and checked together, held in memory while the site runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.content.exercises import Exercise, read_exercises
from app.content.lessons import Lesson, load_lesson
from app.content.schema import ContentError
from app.content.validate import check_lessons


@dataclass
class Course:
    """Lessons in course order plus the exercises they place; `errors` lists what `course check` would report
    without running code."""

    lessons: list[Lesson]
    exercises: dict[str, Exercise]
    lessons_dir: Path
    exercises_dir: Path
    errors: list[ContentError] = field(default_factory=list)

    def get(self, slug: str) -> Lesson | None:
        """Return the lesson with this slug, or None."""
        return next((lesson for lesson in self.lessons if lesson.slug == slug), None)

    def position(self, lesson: Lesson) -> int:
        """Return the lesson's index in course order (by identity: comparing lessons field by field is slow)."""
        return next(i for i, candidate in enumerate(self.lessons) if candidate is lesson)

    def neighbours(self, lesson: Lesson) -> tuple[Lesson | None, Lesson | None]:
        """Return the previous and next lessons in course order (None at either end)."""
        i = self.position(lesson)
        return (self.lessons[i - 1] if i > 0 else None,
                self.lessons[i + 1] if i + 1 < len(self.lessons) else None)


def lesson_files(lessons_dir: Path) -> list[Path]:
    """Return the lesson files of a folder, sorted by name (files starting with `_` are drafts and skipped)."""
    if lessons_dir.is_file():
        return [lessons_dir]
    return sorted(p for p in lessons_dir.glob("*.md") if not p.name.startswith(("_", ".")) and p.name != "README.md")


def load_course(lessons_dir: Path, exercises_dir: Path, static_dir: Path | None = None) -> Course:
    """Load, render and statically check every lesson; never raises for bad content (see `errors`)."""
    lessons, errors = [], []
    if not lessons_dir.exists():
        errors.append(ContentError(lessons_dir, 1, "no such folder; point COURSE_LESSONS_DIR at the lessons"))
    for path in lesson_files(lessons_dir) if lessons_dir.exists() else []:
        lesson, lesson_errors = load_lesson(path)
        errors.extend(lesson_errors)
        if lesson is not None:
            lessons.append(lesson)
    exercises, exercise_errors = read_exercises(exercises_dir)
    lessons.sort(key=lambda lesson: (lesson.meta.order, lesson.slug))
    course = Course(lessons, exercises, lessons_dir, exercises_dir)
    course.errors = errors + exercise_errors + check_lessons(course, static_dir)
    return course
