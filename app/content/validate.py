"""Static checks of lessons: links and anchors, exercise placement, duplicate slugs, headings, code that compiles.

Each check returns `ContentError`s (file, line, what to fix). Running the runnable blocks is in `runnable.py`,
because it takes seconds rather than milliseconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from app.content.markdown import LOOPBACK_FLAG, OUTPUT_LANG, OUTPUT_MACHINES, PYTHON_FLAGS, RUNNABLE_FLAG, CodeBlock
from app.content.schema import ContentError
from app.content.yaml_errors import yaml_line

if TYPE_CHECKING:
    from app.content.course import Course
    from app.content.lessons import Lesson

# ids the lesson page itself uses (templates/lessons/lesson.html and the partials it includes)
RESERVED_IDS = {"main", "toc", "external-links", "exercises", "lesson-nav", "progress", "comments"}
PYTHON_LANGS = {"python", "py", "python3"}
KNOWN_DIRECTIVES = {"exercise"}


def check_lessons(course: Course, static_dir: Path | None = None) -> list[ContentError]:
    """Run every static check over the loaded lessons."""
    errors = check_duplicates(course)
    for lesson in course.lessons:
        errors += check_prerequisites(course, lesson)
        errors += check_links(course, lesson, static_dir)
        errors += check_images(lesson, static_dir)
        errors += check_exercises_placed(course, lesson)
        errors += check_headings(lesson)
        errors += check_python_compiles(lesson)
        errors += expected_outputs(lesson.path, lesson.facts.code_blocks, [h.line for h in lesson.facts.headings])[1]
    return errors


def check_duplicates(course: Course) -> list[ContentError]:
    """Two lessons may not share a slug (one URL) or an order (ambiguous previous/next)."""
    errors = []
    for attr, what in (("slug", "slug"), ("order", "order")):
        seen: dict[object, Lesson] = {}
        for lesson in course.lessons:
            value = getattr(lesson.meta, attr)
            if value in seen:
                errors.append(ContentError(lesson.path, _fm_key_line(lesson, attr),
                                           f"duplicate {what} `{value}`, also used by {seen[value].path.name}; "
                                           f"give each lesson its own {what}"))
            else:
                seen[value] = lesson
    return errors


def check_prerequisites(course: Course, lesson: Lesson) -> list[ContentError]:
    """Each prerequisite is a lesson of the course that comes before this one."""
    orders = {other.meta.slug: other.meta.order for other in course.lessons}
    errors = []
    for slug in lesson.meta.prerequisites:
        if slug not in orders:
            problem = f"prerequisite `{slug}` is no lesson's slug; known: {', '.join(sorted(orders))}"
        elif orders[slug] >= lesson.meta.order:
            problem = (f"prerequisite `{slug}` comes at order {orders[slug]}, not before this lesson "
                       f"({lesson.meta.order}); give it a smaller `order:`")
        else:
            continue
        errors.append(ContentError(lesson.path, _fm_key_line(lesson, "prerequisites"), problem))
    return errors


def _fm_key_line(lesson: Lesson, key: str) -> int:
    text, first = lesson.facts.front_matter or ("", 1)
    for i, line in enumerate(text.splitlines()):
        if line.startswith(f"{key}:"):
            return first + 1 + i
    return first


def check_links(course: Course, lesson: Lesson, static_dir: Path | None) -> list[ContentError]:
    """Internal links must reach a lesson (`/lessons/<slug>`) and, with `#anchor`, one of its headings."""
    errors = []
    for href, line in lesson.facts.links:
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            continue  # external: not fetched here (no network), listed for the instructor to review
        problem = _link_problem(course, lesson, parts.path, parts.fragment, static_dir)
        if problem:
            errors.append(ContentError(lesson.path, line, f"broken link `{href}`: {problem}"))
    return errors


def _link_problem(course: Course, lesson: Lesson, path: str, fragment: str, static_dir: Path | None) -> str:
    if not path:
        target = lesson
    elif path.startswith("/lessons/"):
        target = course.get(path.removeprefix("/lessons/").strip("/"))
        if target is None:
            known = ", ".join(sorted({x.slug for x in course.lessons}))
            return f"no lesson with slug `{path.removeprefix('/lessons/')}` (known: {known})"
    elif path.startswith("/static/"):
        if static_dir is not None and not (static_dir / path.removeprefix("/static/")).is_file():
            return f"no file {path.removeprefix('/static/')} under static/"
        return ""
    elif path.startswith("/"):
        return ""  # another page of the site (index, progress, ...)
    else:
        return "write links between lessons as `/lessons/<slug>` or `/lessons/<slug>#anchor`"
    if fragment and fragment not in target.anchors | RESERVED_IDS:
        return f"lesson `{target.slug}` has no heading with anchor `#{fragment}` (anchors: " \
               f"{', '.join(sorted(target.anchors)) or 'none'})"
    return ""


def check_images(lesson: Lesson, static_dir: Path | None) -> list[ContentError]:
    """Images are files under /static/ that exist, and each says in words what it shows (its alt text)."""
    errors = []
    for src, alt, line in lesson.facts.images:
        parts = urlsplit(src)
        if parts.scheme or parts.netloc or not parts.path.startswith("/static/"):
            errors.append(ContentError(lesson.path, line, f"image `{src}`: put the file in static/ (figures in "
                                                          "static/figures/) and write `/static/...`; the site works "
                                                          "offline, so it loads nothing from elsewhere"))
        elif static_dir is not None and not (static_dir / parts.path.removeprefix("/static/")).is_file():
            errors.append(ContentError(lesson.path, line, f"image `{src}`: no file "
                                                          f"{parts.path.removeprefix('/static/')} under static/"))
        if not alt:
            errors.append(ContentError(lesson.path, line, f"image `{src}` has no alt text; say what it shows "
                                                          "between the brackets: `![two boxes joined by ...](...)`"))
    return errors


def check_exercises_placed(course: Course, lesson: Lesson) -> list[ContentError]:
    """Directives must be known, name an exercise listed in the front matter, and that exercise must exist."""
    errors, placed = [], set()
    for name, arg, line in lesson.facts.directives:
        if name not in KNOWN_DIRECTIVES:
            errors.append(ContentError(lesson.path, line, f"unknown directive `{{{name}}}`; the only one is "
                                                          "`{exercise} <slug>`"))
        elif not arg:
            errors.append(ContentError(lesson.path, line, "`{exercise}` needs a slug: ```{exercise} same-device"))
        elif arg in placed:
            errors.append(ContentError(lesson.path, line, f"exercise `{arg}` is placed twice; keep one directive"))
        else:
            placed.add(arg)
            if arg not in lesson.meta.exercises:
                errors.append(ContentError(lesson.path, line, f"exercise `{arg}` is placed but not listed; add it "
                                                              "under `exercises:` in the front matter"))
    errors += _front_matter_exercises(course, lesson)
    return errors


def _front_matter_exercises(course: Course, lesson: Lesson) -> list[ContentError]:
    errors = []
    for slug in lesson.meta.exercises:
        line = _fm_item_line(lesson, slug)
        exercise = course.exercises.get(slug)
        if exercise is None:
            known = ", ".join(sorted(course.exercises)) or "none"
            errors.append(ContentError(lesson.path, line, f"unknown exercise `{slug}`; create exercises/{slug}/ "
                                                          f"or use one of: {known}"))
        elif exercise.spec.lesson != lesson.slug:
            errors.append(ContentError(lesson.path, line, f"exercise `{slug}` belongs to lesson "
                                                          f"`{exercise.spec.lesson}` (its exercise.yaml); "
                                                          "place it there or change its `lesson:`"))
    return errors


def _fm_item_line(lesson: Lesson, slug: str) -> int:
    text, first = lesson.facts.front_matter or ("", 1)
    index = lesson.meta.exercises.index(slug)
    return yaml_line(text, ("exercises", index), first)


def check_headings(lesson: Lesson) -> list[ContentError]:
    """Headings start at ## (the title is the page's h1) and never skip a level (screen readers navigate by them)."""
    errors, previous = [], 1
    for heading in lesson.facts.headings:
        if heading.level == 1:
            errors.append(ContentError(lesson.path, heading.line, "`#` is the page title (from front matter); "
                                                                  "start sections at `##`"))
        elif heading.level > previous + 1:
            errors.append(ContentError(lesson.path, heading.line, f"heading jumps from level {previous} to "
                                                                  f"{heading.level}; use {'#' * (previous + 1)}"))
        if heading.id in RESERVED_IDS:
            errors.append(ContentError(lesson.path, heading.line, f"heading anchor `#{heading.id}` is used by the "
                                                                  "page itself; rename the heading"))
        previous = heading.level
    return errors


def check_python_compiles(lesson: Lesson) -> list[ContentError]:
    """Every Python block must at least compile, runnable or not, and carry only the flags there are."""
    errors = []
    for block in lesson.facts.code_blocks:
        if block.lang not in PYTHON_LANGS:
            continue
        unknown = sorted(block.flags - set(PYTHON_FLAGS))
        if unknown:
            errors.append(ContentError(lesson.path, block.line, f"a Python block's flags are {', '.join(PYTHON_FLAGS)}"
                                                                f", not {', '.join(unknown)}"))
        elif LOOPBACK_FLAG in block.flags and RUNNABLE_FLAG not in block.flags:
            errors.append(ContentError(lesson.path, block.line, f"`{LOOPBACK_FLAG}` says how a runnable block runs; "
                                                                f"write ```python {RUNNABLE_FLAG} {LOOPBACK_FLAG}"))
        try:
            compile(block.code, str(lesson.path), "exec")
        except SyntaxError as exc:
            line = block.line + (exc.lineno or 1)
            errors.append(ContentError(lesson.path, line, f"Python block does not compile: {exc.msg}; fix it or "
                                                          "mark the block as ```text"))
    return errors


# what the lesson says a block prints, per machine ("cpu", "h100"): the ```output block that says it
Expected = dict[str, CodeBlock]


def expected_outputs(path: Path, blocks: list[CodeBlock], headings: list[int] = ()
                     ) -> tuple[dict[int, Expected], list[ContentError]]:
    """Pair each ```output block with the runnable block before it in its section (no other code block and no
    heading, at the lines `headings`, between them); return {line of the runnable block: {machine: output block}}
    and the misplaced or ambiguous ones as errors."""
    paired: dict[int, Expected] = {}
    errors, owner = [], None
    for block in blocks:
        if owner is not None and any(owner.line < line < block.line for line in headings):
            owner = None
        if block.lang != OUTPUT_LANG:
            owner = block if block.runnable else None
            continue
        unknown = sorted(block.flags - set(OUTPUT_MACHINES))
        if unknown:
            errors.append(ContentError(path, block.line, f"```output knows the machines {', '.join(OUTPUT_MACHINES)}"
                                                         f", not {', '.join(unknown)}"))
            continue
        if owner is None:
            errors.append(ContentError(path, block.line, "an ```output block says what the runnable block before it "
                                                         "prints; put it after a ```python runnable block"))
            continue
        mine = paired.setdefault(owner.line, {})
        for machine in sorted(block.flags) or list(OUTPUT_MACHINES):
            if machine in mine:
                errors.append(ContentError(path, block.line, f"the block at line {owner.line} has two ```output "
                                                             f"blocks for {machine}; keep one"))
            mine[machine] = block
    return paired, errors
