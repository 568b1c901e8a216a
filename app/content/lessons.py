"""Load one lesson file: validate its front matter, render its body once, keep what the checks need."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from app.content.markdown import Facts, Heading, parse, render_tokens, split_parts
from app.content.schema import ContentError, LessonMeta


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

    def placed_exercises(self) -> list[str]:
        """Return the exercise slugs placed by `{exercise}` directives, in page order."""
        return [arg for name, arg, _ in self.facts.directives if name == "exercise"]

    def unplaced_exercises(self) -> list[str]:
        """Return front-matter exercises that no directive places; the page lists them at the end."""
        placed = set(self.placed_exercises())
        return [slug for slug in self.meta.exercises if slug not in placed]


def yaml_line(text: str, loc: tuple, first_line: int) -> int:
    """Return the file line of the YAML node at a pydantic error location (the block's start if not found)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return first_line
    line = first_line
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == key]
            if not match:
                break
            node = match[0][1]
            line = first_line + 1 + match[0][0].start_mark.line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = first_line + 1 + node.start_mark.line
        else:
            break
    return line


def _meta_errors(path: Path, exc: ValidationError, text: str, first_line: int) -> list[ContentError]:
    errors = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "front matter"
        hint = {
            "missing": f"add `{where}:` to the front matter",
            "extra_forbidden": f"remove `{where}` (allowed fields: {', '.join(LessonMeta.model_fields)})",
        }.get(err["type"], f"fix `{where}`: {err['msg']}")
        errors.append(ContentError(path, yaml_line(text, err["loc"], first_line), f"front matter: {hint}"))
    return errors


def read_meta(path: Path, facts: Facts) -> tuple[LessonMeta | None, list[ContentError]]:
    """Validate the front matter; return the metadata or the errors, each at its own line."""
    if facts.front_matter is None:
        return None, [ContentError(path, 1, "no front matter; start the file with a `---` block (title, slug, "
                                            "order, summary, estimated_minutes)")]
    text, first_line = facts.front_matter
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + 1 + mark.line if mark else first_line
        return None, [ContentError(path, line, f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}")]
    if not isinstance(data, dict):
        return None, [ContentError(path, first_line, "front matter must be a mapping of `field: value` lines")]
    try:
        return LessonMeta.model_validate(data), []
    except ValidationError as exc:
        return None, _meta_errors(path, exc, text, first_line)


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
