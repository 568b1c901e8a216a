"""Load exercises from `exercises/<slug>/` folders and validate them against a schema.

One folder is one exercise:

    exercise.yaml   title, lesson, checks (ids + one-line descriptions), hints (in order), limits
    prompt.md       what the learner is asked to do (Markdown)
    starter.py      the code the editor starts with
    solution.py     a reference answer, shown after a pass or after five failed attempts
    wrong/*.py      known-wrong answers; each starts with `# expect: <check_id>` and must fail that check
    probe.py        runs INSIDE the sandbox after the learner's file: `probe(namespace, api) -> dict` of facts
    checks.py       runs OUTSIDE: `evaluate(facts) -> list[CheckResult]`, deciding each check from the report
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

EXPECT_LINE = re.compile(r"^#\s*expect:\s*([a-z][a-z0-9_]*)\s*$")
# limits an exercise may tighten (never loosen past the site's settings); values in seconds / bytes
LIMIT_KEYS = {"wall_s", "cpu_s", "memory_bytes", "output_bytes"}


class CheckSpec(BaseModel):
    """One graded check: a stable id and a one-line description shown to learners."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)

    @field_validator("description")
    @classmethod
    def one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise ValueError("a check's description is one line")
        return value.strip()


class ExerciseSpec(BaseModel):
    """The schema of `exercise.yaml`."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1)
    lesson: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    checks: list[CheckSpec] = Field(min_length=1)
    # in order: the first nudges, the last nearly gives the answer
    hints: list[str] = Field(default_factory=list)
    limits: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def unique_ids_known_limits(self) -> "ExerciseSpec":
        ids = [c.id for c in self.checks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"check ids must be unique; repeated: {', '.join(dupes)}")
        unknown = sorted(set(self.limits) - LIMIT_KEYS)
        if unknown:
            raise ValueError(f"unknown limits {unknown}; allowed: {sorted(LIMIT_KEYS)}")
        return self

    @property
    def check_ids(self) -> list[str]:
        return [c.id for c in self.checks]


class WrongAnswer(BaseModel):
    """A known-wrong answer and the check it must fail."""

    path: Path
    expect: str | None  # None when the first line lacks `# expect: <check_id>`
    code: str


class Exercise(BaseModel):
    """An exercise as the site and the grader use it: the spec plus its files' contents."""

    slug: str
    path: Path
    spec: ExerciseSpec
    prompt_md: str
    starter: str
    solution: str
    probe: str = ""
    wrong: list[WrongAnswer] = Field(default_factory=list)

    @property
    def title(self) -> str:
        return self.spec.title

    @property
    def lesson(self) -> str:
        return self.spec.lesson

    @property
    def hints(self) -> list[str]:
        return self.spec.hints

    @property
    def checks(self) -> list[CheckSpec]:
        return self.spec.checks

    @property
    def checks_path(self) -> Path:
        """The file that decides the checks outside the sandbox."""
        return self.path / "checks.py"


def read_expect(code: str) -> str | None:
    """The check id a wrong answer names in its first line (`# expect: <check_id>`), or None."""
    first = code.splitlines()[0] if code.strip() else ""
    match = EXPECT_LINE.match(first.strip())
    return match.group(1) if match else None


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
    probe = folder / "probe.py"
    wrong = [WrongAnswer(path=p, code=(text := p.read_text(encoding="utf-8")), expect=read_expect(text))
             for p in sorted((folder / "wrong").glob("*.py"))]
    return Exercise(slug=folder.name, path=folder, spec=spec, prompt_md=parts["prompt.md"],
                    starter=parts["starter.py"], solution=parts["solution.py"],
                    probe=probe.read_text(encoding="utf-8") if probe.is_file() else "", wrong=wrong)


def load_exercises(root: Path) -> dict[str, Exercise]:
    """Load every exercise folder under root, keyed by slug (the folder name)."""
    if not root.is_dir():
        return {}
    return {f.name: load_exercise(f) for f in sorted(root.iterdir()) if (f / "exercise.yaml").is_file()}
