"""The machines a learner may pick to run code on ("Run on" beside an exercise and every runnable lesson block).

The choices are data: one row each, naming the simulated machine's profile (app/harness/machine/machines/) and how
many of its GPUs the program finds. An exercise decides which of them make sense for its checks (exercise.yaml
`machines:`); without that line it offers the CUDA machines with at least the GPUs it asks for (`gpus:`), or only
its own machine when `machine:` names one its checks are about (fits-on-one-gpu's L4). A lesson block offers
every choice. The default is one H100 wherever it is offered.

The learner's pick is remembered on their learner row (anonymous learners too) and a submission stores the choice
it ran on; the run and its verdict are both on the picked machine (docs/authoring.md, "Where code runs").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.content.exercises import ExerciseSpec


@dataclass(frozen=True)
class MachineChoice:
    """One "Run on" choice: an id the browser posts, the words it shows, the profile and its GPU count."""

    id: str
    label: str
    machine: str  # a profile id in app/harness/machine/machines/
    gpus: int  # GPUs the program finds (0: none; a Mac's GPU is MPS, not counted here)
    cuda: bool  # the program finds CUDA devices (what exercises written for NVIDIA GPUs need)

    def as_dict(self) -> dict:
        return {"id": self.id, "label": self.label, "machine": self.machine, "gpus": self.gpus}


CHOICES: tuple[MachineChoice, ...] = (
    MachineChoice("laptop", "A laptop without a GPU", "cpu", 0, False),
    MachineChoice("mac", "A MacBook (Apple silicon)", "mac-m3-max", 0, False),
    MachineChoice("t4", "Colab's T4", "t4", 1, True),
    MachineChoice("h100", "One H100", "h100", 1, True),
    MachineChoice("h100x2", "Two H100s", "h100", 2, True),
)
BY_ID = {c.id: c for c in CHOICES}
DEFAULT = "h100"


class UnknownMachine(ValueError):
    """A machine choice that does not exist, or that this exercise does not offer; the message lists what does."""


def describe(choices) -> str:
    return ", ".join(f"{c.id} ({c.label})" for c in choices)


def known(choice_id: str) -> MachineChoice:
    """The choice with this id; UnknownMachine naming every choice otherwise."""
    choice = BY_ID.get(choice_id) if isinstance(choice_id, str) else None
    if choice is None:
        raise UnknownMachine(f"There is no machine {choice_id!r} to run on; choose one of: {describe(CHOICES)}.")
    return choice


def own_machine(spec: ExerciseSpec) -> MachineChoice:
    """The exercise's own machine as a choice (its `machine:` profile, `gpus:` GPUs): what its checks are about."""
    from app.core.config import get_settings
    from app.harness.machine.machines import get

    profile = get(spec.machine, get_settings().sim_machines_dir)
    return MachineChoice(spec.machine, profile.title, spec.machine, spec.gpus, profile.gpus > 0)


def for_exercise(spec: ExerciseSpec) -> tuple[MachineChoice, ...]:
    """The choices an exercise offers, in CHOICES order."""
    if spec.machines:
        return tuple(c for c in CHOICES if c.id in spec.machines)
    if spec.machine is not None:
        return (own_machine(spec),)
    return tuple(c for c in CHOICES if c.cuda and c.gpus >= spec.gpus)


def default_for(choices: tuple[MachineChoice, ...]) -> MachineChoice:
    """One H100 where offered, else the first choice (two H100s for a two-GPU exercise)."""
    return next((c for c in choices if c.id == DEFAULT), choices[0])


def pick(choices: tuple[MachineChoice, ...], wanted: str | None, *, strict: bool, where: str = "this exercise"
         ) -> MachineChoice:
    """The choice to run on: `wanted` when offered; else the default, or UnknownMachine when `strict` (the learner
    asked for it in this very request, so a silent substitute would mislead)."""
    if wanted is not None:
        for choice in choices:
            if choice.id == wanted:
                return choice
        if strict:
            known(wanted)  # an unknown id says so first
            raise UnknownMachine(f"{where[:1].upper() + where[1:]} cannot run on {BY_ID[wanted].label}; "
                                 f"choose one of: {describe(choices)}.")
    return default_for(choices)
