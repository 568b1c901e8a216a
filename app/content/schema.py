"""The schema of a lesson's YAML front matter, and the error type every content check reports."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

SLUG_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"


@dataclass(frozen=True)
class ContentError:
    """One problem in the course content: where it is and what to do about it."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{display_path(self.path)}:{self.line}: {self.message}"


class ContentInvalid(ValueError):
    """Raised when content is broken and the caller refuses to go on (production start-up, a strict loader)."""

    def __init__(self, errors: list[ContentError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def display_path(path: Path) -> str:
    """Show a path relative to the working directory when it lies below it, so messages stay short."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)


class ExternalLink(BaseModel):
    """A link to further reading, listed at the end of the lesson."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1)
    url: HttpUrl
    # one sentence on why the link is worth a click
    note: str = ""


class LessonMeta(BaseModel):
    """The front matter every lesson starts with, between two `---` lines."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=120)
    slug: str = Field(pattern=SLUG_PATTERN)
    # position in the course; lessons are listed and chained (previous/next) by this number
    order: int = Field(ge=1)
    summary: str = Field(min_length=1, max_length=400)
    # minutes a learner needs to read the lesson and do its exercises
    estimated_minutes: int = Field(ge=1, le=600)
    exercises: list[str] = Field(default_factory=list)
    # slugs of the lessons this one builds on; each must come earlier in the course (`course check` says so)
    prerequisites: list[str] = Field(default_factory=list)
    external_links: list[ExternalLink] = Field(default_factory=list)
