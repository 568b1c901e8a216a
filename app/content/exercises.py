"""Load exercises from `exercises/<slug>/` folders and validate them against a schema."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field


class CheckSpec(BaseModel):
    """One graded check: a stable id and a one-line description shown to learners."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str


class ExerciseSpec(BaseModel):
    """The schema of `exercise.yaml`."""

    model_config = ConfigDict(extra="forbid")
    title: str
    lesson: str
    checks: list[CheckSpec] = Field(min_length=1)
    hints: list[str] = Field(default_factory=list)
    limits: dict[str, float] = Field(default_factory=dict)


class Exercise(BaseModel):
    """An exercise as the site and the grader use it: the spec plus its files' contents."""

    slug: str
    path: Path
    spec: ExerciseSpec
    prompt_md: str
    starter: str
    solution: str

    @property
    def title(self) -> str:
        return self.spec.title


def load_exercise(folder: Path) -> Exercise:
    """Read one exercise folder; raise ValueError naming the file on a bad or missing part."""
    spec_file = folder / "exercise.yaml"
    try:
        spec = ExerciseSpec.model_validate(yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {})
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ValueError(f"{spec_file}: {exc}") from exc
    parts = {}
    for name in ("prompt.md", "starter.py", "solution.py"):
        try:
            parts[name] = (folder / name).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{folder / name}: missing; every exercise needs {name}") from exc
    return Exercise(slug=folder.name, path=folder, spec=spec, prompt_md=parts["prompt.md"],
                    starter=parts["starter.py"], solution=parts["solution.py"])


def load_exercises(root: Path) -> dict[str, Exercise]:
    """Load every exercise folder under root, keyed by slug (the folder name)."""
    if not root.is_dir():
        return {}
    return {f.name: load_exercise(f) for f in sorted(root.iterdir()) if (f / "exercise.yaml").is_file()}
