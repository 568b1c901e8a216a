"""Machine profiles (app/harness/machine/machines/): loaded by one loader, picked by `course run --machine`, by
COURSE_SIM_MACHINE and by a throw-away profile a test adds; seen by the program as torch reports the card."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import ROOT
from app.content.exercises import ExerciseSpec
from app.harness.contract import DEFAULT_HOST, machine_host
from app.harness.machine import machines
from tests.helpers import side_by_side

COURSE = [str(Path(sys.executable).with_name("course"))]
PROPS = ("import torch\n"
         "p = torch.cuda.get_device_properties(0)\n"
         "print(p.name, p.total_memory, (p.major, p.minor), p.multi_processor_count, torch.cuda.device_count(),\n"
         "      torch.cuda.is_bf16_supported(including_emulation=False), sep='|')\n")
IDS = {"t4", "l4", "a100-40gb", "a100-80gb", "h100", "h200", "b200", "mac-m3-max", "cpu"}


def course(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*COURSE, *args], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "COURSE_ENV": "development", **env})


def test_every_profile_loads_and_names_a_source_for_each_figure():
    found = machines.load_all()
    assert IDS <= set(found)
    for m in found.values():
        for figure in machines.FIGURES:
            assert m.source(figure).strip(), (m.id, figure)
        if machines.BUILDS[m.build].cuda:  # what torch would report agrees with the bf16 figure (capability >= 8.0)
            assert m.value("bf16") == (m.value("capability")[0] >= 8), m.id


def test_the_three_builds_are_profiles_with_a_source_for_each_fact():
    assert set(machines.BUILDS) == {"cuda", "macos-arm64", "cpu"}
    for build in machines.BUILDS:
        data = json.loads((machines.FOLDER / "builds" / f"{build}.json").read_text())
        assert all(str(data[fact]["source"]).strip() for fact in machines.BUILD_FACTS), build
    assert [machines.BUILDS[b].accelerator for b in ("cuda", "macos-arm64", "cpu")] == ["cuda", "mps", None]


THROWAWAY = Path(__file__).with_name("machines")  # one file: throwaway-card.json, two made-up cards of 12 GiB
CARDS = ("import torch\n"
         "for i in range(torch.cuda.device_count()):\n"
         "    p = torch.cuda.get_device_properties(i)\n"
         "    print(i, p.name, p.total_memory, (p.major, p.minor), p.multi_processor_count, sep='|')\n"
         "print(torch.cuda.mem_get_info(1)[1], torch.cuda.is_bf16_supported(including_emulation=False), sep='|')\n"
         "try:\n"
         "    torch.empty(13 << 30, dtype=torch.uint8, device='cuda:1')\n"
         "except torch.OutOfMemoryError as exc:\n"
         "    print(str(exc).splitlines()[0])\n")


def test_a_machine_added_as_one_file_in_a_test_folder_runs_a_program_through_course_run(tmp_path: Path):
    """Adding a machine is adding its profile: this one lives in tests/harness/machines/, and nothing in app/
    knows it (COURSE_SIM_MACHINES_DIR points there)."""
    assert [p.name for p in THROWAWAY.iterdir()] == ["throwaway-card.json"]
    assert "throwaway-card" not in machines.load_all()
    script = tmp_path / "cards.py"
    script.write_text(CARDS)
    run = course("run", "--machine", "throwaway-card", str(script), COURSE_SIM_MACHINES_DIR=str(THROWAWAY))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    card = f"Throwaway Test Card 12GB|{12 << 30}|(8, 6)|46"
    assert lines[:3] == [f"0|{card}", f"1|{card}", f"{12 << 30}|True"]
    assert lines[3].startswith("CUDA out of memory. Tried to allocate 13.00 GiB. GPU 1 has a total capacity of "
                               "12.00 GiB")


def test_default_is_h100_with_the_memory_a_real_card_reports():
    assert DEFAULT_HOST.machine == "h100" and DEFAULT_HOST.gpu_name == "NVIDIA H100 80GB HBM3"
    assert DEFAULT_HOST.gpu_memory_bytes == 81089 << 20  # a published repr: total_memory=81089MB, not 80 GiB
    assert machine_host("t4").capability == (7, 5) and machine_host("mac-m3-max").build == "macos-arm64"


def test_a_profile_without_a_source_is_refused_naming_file_and_figure(tmp_path: Path):
    data = json.loads((machines.FOLDER / "t4.json").read_text())
    data["id"] = "bad"
    del data["peak_flops"]["fp32"]["source"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(machines.MachineError, match=r"bad\.json: figure 'peak_flops.fp32' needs a value and a source"):
        machines.load_all(tmp_path)


def test_exercise_yaml_machine_is_validated():
    spec = ExerciseSpec.model_validate({"title": "t", "lesson": "l", "checks": [{"id": "a", "description": "d"}],
                                        "machine": "l4"})
    assert spec.machine == "l4"
    with pytest.raises(ValueError, match="unknown machine 'l5'; one of a100-40gb"):
        ExerciseSpec.model_validate({"title": "t", "lesson": "l", "checks": [{"id": "a", "description": "d"}],
                                     "machine": "l5"})


def test_course_run_machine_flag_setting_and_a_throw_away_profile(tmp_path: Path):
    script = tmp_path / "props.py"
    script.write_text(PROPS)
    data = json.loads((machines.FOLDER / "h100.json").read_text())
    data.update(id="test-card", title="A throw-away card")
    data["name"] = {"value": "Test Card 7GB", "source": "this test"}
    data["total_memory"] = {"value": 7 << 30, "source": "this test"}
    (tmp_path / "test-card.json").write_text(json.dumps(data))
    t4, l4, card, unknown = side_by_side(
        lambda: course("run", "--machine", "t4", "--gpus", "2", str(script)),
        lambda: course("run", str(script), COURSE_SIM_MACHINE="l4"),
        lambda: course("run", "--machine", "test-card", str(script), COURSE_SIM_MACHINES_DIR=str(tmp_path)),
        lambda: course("run", "--machine", "t5", str(script)))
    assert t4.returncode == 0, t4.stderr
    assert t4.stdout == f"Tesla T4|{15095 << 20}|(7, 5)|40|2|False\n"
    assert l4.returncode == 0 and l4.stdout.startswith("NVIDIA L4|") and l4.stdout.endswith("|(8, 9)|58|1|True\n")
    assert card.returncode == 0, card.stderr
    assert card.stdout == f"Test Card 7GB|{7 << 30}|(9, 0)|132|1|True\n"
    assert unknown.returncode == 2 and "unknown machine 't5'; one of a100-40gb" in unknown.stderr


def test_exercise_yaml_machine_picks_the_card_a_graded_job_runs_on():
    starter = ROOT / "exercises" / "fits-on-one-gpu" / "starter.py"  # machine: l4
    proc = course("grade", "--json", "fits-on-one-gpu", str(starter))
    verdict = json.loads(proc.stdout)
    fits = next(c for c in verdict["checks"] if c["id"] == "fits")
    assert proc.returncode == 1 and not fits["passed"]
    assert fits["message"].startswith("line 16: torch.OutOfMemoryError: asking for 1024.00 MiB more did not fit on "
                                      "the 22.49 GiB card; the peak before it was ")


def test_profiles_are_read_again_when_a_file_changes(tmp_path: Path):
    """load_all keeps the profiles it read (a verdict names its machine four times) until a file changes."""
    data = json.loads((machines.FOLDER / "t4.json").read_text())
    data["id"], data["title"] = "kept-card", "First title"
    (tmp_path / "kept-card.json").write_text(json.dumps(data))
    assert machines.load_all(tmp_path)["kept-card"].title == "First title"
    assert machines.load_all(tmp_path) is not machines.load_all(tmp_path)  # each caller gets its own dict
    data["title"] = "A second, longer title"
    (tmp_path / "kept-card.json").write_text(json.dumps(data))
    assert machines.get("kept-card", tmp_path).title == "A second, longer title"
    (tmp_path / "kept-card.json").unlink()
    assert "kept-card" not in machines.load_all(tmp_path)
