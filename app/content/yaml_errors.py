"""YAML with line numbers: parse a block (front matter, exercise.yaml) and report each problem at its own line.

Lessons and exercises share these, so a bad field reads the same wherever it is: `file:line: what to fix`.
Lines: `first_line` is the line just above the YAML text (the opening `---` of front matter; 0 for a whole file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from app.content.schema import ContentError


def yaml_line(text: str, loc: tuple, first_line: int) -> int:
    """Return the file line of the YAML node at a pydantic error location (the block's start if not found)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return max(1, first_line)
    line = max(1, first_line)
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


def parse_mapping(path: Path, text: str, first_line: int, what: str, *,
                  allow_empty: bool = False) -> tuple[dict | None, list[ContentError]]:  # fmt: skip
    """Parse YAML that must be a mapping (or nothing, with allow_empty); return it, or None and the error."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + 1 + mark.line if mark else max(1, first_line)
        return None, [ContentError(path, line, f"{what} is not valid YAML: {getattr(exc, 'problem', exc)}")]
    if data is None and allow_empty:
        data = {}
    if not isinstance(data, dict):
        return None, [ContentError(path, max(1, first_line), f"{what} must be a mapping of `field: value` lines")]
    return data, []


def schema_errors(path: Path, exc: ValidationError, text: str, first_line: int, model: type[BaseModel], *,
                  what: str, prefix: str = "") -> list[ContentError]:  # fmt: skip
    """Turn a pydantic ValidationError into one ContentError per problem, each at its field's line."""
    errors = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or what
        message = str(err["msg"]).removeprefix("Value error, ")
        hint = {
            "missing": f"add `{where}:` to {what}",
            "extra_forbidden": f"remove `{where}` (allowed fields: {', '.join(model.model_fields)})",
        }.get(err["type"], f"fix `{where}`: {message}")
        errors.append(ContentError(path, yaml_line(text, err["loc"], first_line), f"{prefix}{hint}"))
    return errors


def validate(model: type[BaseModel], data: Any, path: Path, text: str, first_line: int, *, what: str,
             prefix: str = "") -> tuple[Any, list[ContentError]]:  # fmt: skip
    """Validate parsed YAML against a model; return the instance, or None and the errors at their lines."""
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, schema_errors(path, exc, text, first_line, model, what=what, prefix=prefix)
