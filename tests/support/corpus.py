"""Run the corpus under the simulation, through the real sandbox, and compare with the expected outcomes.

Used by the test (test_fidelity.py) and by `make bench` (bench/fidelity.py, which reports `sim_fidelity`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app import ROOT
from app.harness.contract import DEFAULT_HOST, machine_host
from app.runner import Job
from tests.support.outcome import Outcome, differences, metadata, outcome_of

HERE = ROOT / "tests" / "fidelity"  # the corpus: its programs and what each must do
PROGRAMS, EXPECTED = HERE / "programs", HERE / "expected"


@dataclass
class Program:
    """One corpus program, its needs and its expected outcome."""

    path: Path
    source: str
    gpus: int
    expected: dict
    machine: str | None = None  # a machine profile other than a CUDA host (the Mac), from `# fidelity: machine=`

    @property
    def name(self) -> str:
        return self.path.stem


def load_corpus() -> list[Program]:
    """Every program of tests/fidelity/programs/ with its expected outcome (a missing one is an empty dict)."""
    programs = []
    for path in sorted(PROGRAMS.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        expected_path = EXPECTED / f"{path.stem}.json"
        expected = json.loads(expected_path.read_text(encoding="utf-8")) if expected_path.is_file() else {}
        meta = metadata(source)
        programs.append(Program(path, source, meta["gpus"], expected, meta["machine"]))
    return programs


def simulate(blocking_runner, program: Program) -> Outcome:
    """Run one program as a plain sandbox job on the simulated host with the GPUs it needs."""
    host = machine_host(program.machine) if program.machine else DEFAULT_HOST.with_gpus(program.gpus)
    result = blocking_runner.run(Job(code=program.source, filename=program.path.name, host=host))
    return outcome_of(result.stdout, result.stderr, host.gpu_name)


def compare(blocking_runner, program: Program) -> list[str]:
    """The differences between the simulation's outcome and the expected one ([] when they match)."""
    return differences(program.expected, simulate(blocking_runner, program))
