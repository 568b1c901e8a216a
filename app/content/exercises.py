"""Load exercises from `exercises/<slug>/` folders and validate them against a schema.

One folder is one exercise:

    exercise.yaml   title, lesson, checks (ids + one-line descriptions), hints (in order), limits, needs_gpu, gpus,
                    launch (several ranks, as torchrun starts them), machine (the simulated machine's profile id)
    prompt.md       what the learner is asked to do (Markdown)
    starter.py      the code the editor starts with
    solution.py     a reference answer, shown after a pass or after five failed attempts
    wrong/*.py      known-wrong answers; each starts with `# expect: <check_id>` and must fail that check
    probe.py        runs INSIDE the sandbox after the learner's file: `probe(namespace, api) -> dict` of facts
    checks.py       runs OUTSIDE: `evaluate(facts) -> list[CheckResult]`, deciding each check from the report

`read_exercise(folder)` is the one loader: the site (through app.content.course), `course check`, `course grade`
and the grader's tests all read exercises through it, and its problems are `ContentError`s with the line of
exercise.yaml they are about. `load_exercise` and `load_exercises` are the strict forms for callers that stop
at the first broken exercise (ContentInvalid, a ValueError).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.content.schema import ContentError, ContentInvalid
from app.content.yaml_errors import parse_mapping, validate
from app.core.unlock import parse_unlock
from app.harness.contract import MAX_GPUS, MAX_NODES

EXPECT_LINE = re.compile(r"^#\s*expect:\s*([a-z][a-z0-9_]*)\s*$")
# limits an exercise may tighten (never loosen past the site's settings); values in seconds / bytes
LIMIT_KEYS = {"wall_s", "cpu_s", "memory_bytes", "output_bytes"}


class CheckSpec(BaseModel):
    """One graded check: a stable id and a one-line description shown to learners."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)
    # machine profiles (app/harness/machine/machines/) the program must also run on for this check to pass:
    # "cpu" (a laptop without a GPU), "mac-m3-max" (an Apple silicon Mac); the grader runs it there too
    also_runs_on: list[str] = Field(default_factory=list)

    @field_validator("also_runs_on")
    @classmethod
    def known_machines(cls, value: list[str]) -> list[str]:
        from app.core.config import get_settings
        from app.harness.machine.machines import MachineError, get

        for machine in value:
            try:
                get(machine, get_settings().sim_machines_dir)
            except MachineError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("description")
    @classmethod
    def one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise ValueError("a check's description is one line")
        return value.strip()


class LaunchSpec(BaseModel):
    """`launch:` run the learner's file as `torchrun --standalone --nproc-per-node=N` would: N ranks, rank r on
    cuda:r (torchrun's own flag names, so an author can copy them from a launch command). With `nnodes: M`, as
    `torchrun --nnodes=M --nproc-per-node=N --rdzv-backend=c10d` on each of M simulated machines: M * N ranks,
    each machine with its own GPUs (a rank's GPU is cuda:LOCAL_RANK)."""

    model_config = ConfigDict(extra="forbid")
    nproc_per_node: int = Field(ge=1, le=MAX_GPUS)
    nnodes: int = Field(default=1, ge=1, le=MAX_NODES)
    # `accelerate launch` instead of torchrun (app/harness/launchers.py); "accelerate-cpu" is its --cpu
    launcher: Literal["torchrun", "accelerate", "accelerate-cpu"] = "torchrun"


class ExerciseSpec(BaseModel):
    """The schema of `exercise.yaml`."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1)
    lesson: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    checks: list[CheckSpec] = Field(min_length=1)
    # in order: the first nudges, the last nearly gives the answer
    hints: list[str] = Field(default_factory=list)
    limits: dict[str, float] = Field(default_factory=dict)
    # runs on a real GPU (a GPU slot) where the host has one; elsewhere on the simulated GPU, and the verdict says so
    needs_gpu: bool = False
    # simulated CUDA GPUs the program finds where the host has none (app/harness/contract.py); 2 for multi-GPU code
    gpus: int = Field(default=1, ge=1, le=MAX_GPUS)
    # several ranks in one job (app/harness/launch.py); None: one process
    launch: LaunchSpec | None = None
    # the simulated machine (a profile id in app/harness/machine/machines/: t4, l4, a100-80gb ...); None: the site's
    # COURSE_SIM_MACHINE. Where the job finds a real GPU, the real card answers instead
    machine: str | None = None
    # the "Run on" choices it offers (ids of app/content/machine_choices.py); None: the CUDA machines with at least
    # `gpus` GPUs, or only its own `machine:`. List the laptop and the Mac only where the checks judge them fairly
    machines: list[str] | None = Field(default=None, min_length=1)

    @field_validator("machines")
    @classmethod
    def known_choices(cls, value: list[str] | None) -> list[str] | None:
        from app.content.machine_choices import UnknownMachine, known

        for choice in value or []:
            try:
                known(choice)
            except UnknownMachine as exc:
                raise ValueError(str(exc)) from None
        return value
    # when the reference solution is shown before a pass (app/core/unlock.py); None: the course's
    # COURSE_SOLUTION_UNLOCK
    solution_unlock: str | None = None

    @field_validator("solution_unlock")
    @classmethod
    def known_unlock_rule(cls, value: str | None) -> str | None:
        return None if value is None else str(parse_unlock(value))

    @field_validator("machine")
    @classmethod
    def known_machine(cls, value: str | None) -> str | None:
        if value is not None:
            from app.core.config import get_settings
            from app.harness.machine.machines import MachineError, get

            try:
                get(value, get_settings().sim_machines_dir)
            except MachineError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def unique_ids_known_limits(self) -> "ExerciseSpec":
        ids = [c.id for c in self.checks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"check ids must be unique; repeated: {', '.join(dupes)}")
        unknown = sorted(set(self.limits) - LIMIT_KEYS)
        if unknown:
            raise ValueError(f"unknown limits {unknown}; allowed: {sorted(LIMIT_KEYS)}")
        per_node = self.launch.nproc_per_node if self.launch else 1
        if self.nproc > MAX_GPUS:
            raise ValueError(f"launch asks for {self.nproc} ranks (nnodes x nproc_per_node); a job runs at most "
                             f"{MAX_GPUS}")
        if per_node > 1 and self.gpus < per_node:
            raise ValueError(f"launch.nproc_per_node is {per_node} but gpus is {self.gpus}: rank r uses cuda:r, so "
                             f"set gpus: {per_node} (or more)")
        from app.content.machine_choices import BY_ID

        for choice in (BY_ID[c] for c in self.machines or []):
            if (choice.cuda and choice.gpus < self.gpus) or (not choice.cuda and self.nproc > 1):
                raise ValueError(f"machines: {choice.id} ({choice.label}) has {choice.gpus} CUDA GPUs and this "
                                 f"exercise needs {self.gpus}; leave it out")
        if self.nproc > 1 and self.needs_gpu:
            raise ValueError("needs_gpu cannot go with launch.nproc_per_node > 1 yet: a GPU slot holds one GPU and "
                             "every rank needs its own; leave needs_gpu out (the ranks run on simulated GPUs)")
        return self

    @property
    def nproc(self) -> int:
        """Rank processes per job, on every machine together (1 unless `launch:` asks for more)."""
        return self.launch.nproc_per_node * self.launch.nnodes if self.launch else 1

    @property
    def launcher(self) -> str | None:
        """Who starts the ranks: None for torchrun, else the launcher's name (launchers.py)."""
        return self.launch.launcher if self.launch and self.launch.launcher != "torchrun" else None

    @property
    def nnodes(self) -> int:
        """Simulated machines the ranks are spread over (1 unless `launch: {nnodes}` asks for more)."""
        return self.launch.nnodes if self.launch else 1

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


# the files every exercise folder has besides exercise.yaml, and the Exercise field each fills
PARTS = {"prompt.md": "prompt_md", "starter.py": "starter", "solution.py": "solution"}


def _read(path: Path, errors: list[ContentError], missing: str) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        errors.append(ContentError(path, 1, f"not UTF-8 text (byte {exc.start}); save it as UTF-8"))
    except OSError:
        errors.append(ContentError(path, 1, missing))
    return None


def _read_spec(spec_file: Path) -> tuple[ExerciseSpec | None, list[ContentError]]:
    errors: list[ContentError] = []
    text = _read(spec_file, errors, "cannot read it; every exercise needs exercise.yaml")
    if text is None:
        return None, errors
    data, errors = parse_mapping(spec_file, text, 0, "exercise.yaml", allow_empty=True)
    if data is None:
        return None, errors
    return validate(ExerciseSpec, data, spec_file, text, 0, what="exercise.yaml")


def read_exercise(folder: Path) -> tuple[Exercise | None, list[ContentError]]:
    """Read one exercise folder; return the exercise, or None and every problem (file, line, what to fix)."""
    spec, errors = _read_spec(folder / "exercise.yaml")
    parts = {field: _read(folder / name, errors, f"missing; every exercise needs {name}")
             for name, field in PARTS.items()}  # fmt: skip
    wrong = []
    for path in sorted((folder / "wrong").glob("*.py")):
        code = _read(path, errors, "cannot read it")
        if code is not None:
            wrong.append(WrongAnswer(path=path, code=code, expect=read_expect(code)))
    probe = folder / "probe.py"
    probe_code = _read(probe, errors, "cannot read it") if probe.is_file() else ""
    if errors or spec is None:
        return None, errors
    return Exercise(slug=folder.name, path=folder, spec=spec, probe=probe_code, wrong=wrong, **parts), []


def exercise_folders(root: Path) -> list[Path]:
    """Return the exercise folders under root (those holding an exercise.yaml), sorted by name."""
    if not root.is_dir():
        return []
    return [folder for folder in sorted(root.iterdir()) if (folder / "exercise.yaml").is_file()]


def read_exercises(root: Path) -> tuple[dict[str, Exercise], list[ContentError]]:
    """Read every exercise folder under root, keyed by slug; one broken folder does not hide the others."""
    exercises, errors = {}, []
    for folder in exercise_folders(root):
        exercise, problems = read_exercise(folder)
        errors += problems
        if exercise is not None:
            exercises[exercise.slug] = exercise
    return exercises, errors


def load_exercise(folder: Path) -> Exercise:
    """Read one exercise folder; raise ContentInvalid (a ValueError naming file and line) if it is broken."""
    exercise, errors = read_exercise(folder)
    if exercise is None:
        raise ContentInvalid(errors)
    return exercise


def load_exercises(root: Path) -> dict[str, Exercise]:
    """Read every exercise folder under root, keyed by slug; raise ContentInvalid if any is broken."""
    exercises, errors = read_exercises(root)
    if errors:
        raise ContentInvalid(errors)
    return exercises
