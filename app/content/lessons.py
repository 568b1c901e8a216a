"""Load one lesson file: validate its front matter, render its body once, keep what the checks need."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

from app.content.markdown import CodeBlock, Facts, Heading, parse, render_tokens, split_parts
from app.content.schema import ContentError, LessonMeta
from app.content.yaml_errors import parse_mapping, validate


@dataclass
class Lesson:
    """A lesson ready to serve: metadata, rendered parts (HTML and exercise placements), table of contents."""

    meta: LessonMeta
    path: Path
    parts: list[tuple[str, str]]
    facts: Facts
    toc: list[Heading] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return self.meta.slug

    @property
    def title(self) -> str:
        return self.meta.title

    @property
    def url(self) -> str:
        return f"/lessons/{self.meta.slug}"

    @property
    def anchors(self) -> set[str]:
        return {h.id for h in self.facts.headings}

    @property
    def runnable_blocks(self) -> list[CodeBlock]:
        """The blocks marked runnable, in page order: block N of the page (`id="block-N"`, its Run) is the N-th."""
        return [block for block in self.facts.code_blocks if block.runnable]

    def runnable_block(self, number: str) -> CodeBlock | None:
        """Runnable block `number` ("1" is the first), or None when the lesson has no such block."""
        blocks = self.runnable_blocks
        if not (number.isascii() and number.isdigit()) or not 0 < int(number) <= len(blocks):
            return None
        return blocks[int(number) - 1]

    def placed_exercises(self) -> list[str]:
        """Return the exercise slugs placed by `{exercise}` directives, in page order."""
        return [arg for name, arg, _ in self.facts.directives if name == "exercise"]

    def outline(self) -> list[tuple[int, str, str]]:
        """Return "On this page": (level, anchor, heading text or exercise slug) in page order; an exercise placed
        by a directive sits one level under the section it is in (level 3, anchor `exercise-<slug>`)."""
        entries = [(h.line, h.level, h.id, h.text) for h in self.toc]
        entries += [(line, 3, f"exercise-{arg}", arg) for name, arg, line in self.facts.directives
                    if name == "exercise"]
        return [(level, anchor, text) for _line, level, anchor, text in sorted(entries, key=lambda e: e[0])]

    def outline_tree(self, exercises: Container[str]) -> list[tuple[str, str, list[tuple[str, str]]]]:
        """Return the outline nested: (anchor, text, [(anchor, text) of its level-3 entries]) per section, so
        "On this page" numbers the sections 1, 2, 3 and what sits under one takes no number from them. An
        exercise not in `exercises` (one that failed to load) is left out; a level-3 entry before any section is a
        section of its own."""
        tree: list[tuple[str, str, list[tuple[str, str]]]] = []
        for level, anchor, text in self.outline():
            if anchor.startswith("exercise-") and text not in exercises:
                continue
            if level == 3 and tree:
                tree[-1][2].append((anchor, text))
            else:
                tree.append((anchor, text, []))
        return tree

    def unplaced_exercises(self) -> list[str]:
        """Return front-matter exercises that no directive places; the page lists them at the end."""
        placed = set(self.placed_exercises())
        return [slug for slug in self.meta.exercises if slug not in placed]


def read_meta(path: Path, facts: Facts) -> tuple[LessonMeta | None, list[ContentError]]:
    """Validate the front matter; return the metadata or the errors, each at its own line."""
    if facts.front_matter is None:
        return None, [ContentError(path, 1, "no front matter; start the file with a `---` block (title, slug, "
                                            "order, summary, estimated_minutes)")]
    text, first_line = facts.front_matter
    data, errors = parse_mapping(path, text, first_line, "front matter")
    if data is None:
        return None, errors
    return validate(LessonMeta, data, path, text, first_line, what="the front matter", prefix="front matter: ")


def load_lesson(path: Path) -> tuple[Lesson | None, list[ContentError]]:
    """Read, validate and render one lesson file; return (lesson or None, errors)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [ContentError(path, 1, f"cannot read the file ({exc}); save it as UTF-8")]
    tokens, facts = parse(source)
    meta, errors = read_meta(path, facts)
    if meta is None:
        return None, errors
    toc = [h for h in facts.headings if h.level in (2, 3)]
    return Lesson(meta=meta, path=path, parts=split_parts(render_tokens(tokens)), facts=facts, toc=toc), errors
