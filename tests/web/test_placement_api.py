"""The placement map through the front door: each exercise's solution and a wrong answer, graded by the real
sandbox, carry `placement` entries on the right lines with the right events (issue 16, item 4)."""

from __future__ import annotations

import pytest

from app import ROOT


def source(slug: str, name: str) -> str:
    return (ROOT / "exercises" / slug / name).read_text(encoding="utf-8")


def line_of(code: str, text: str) -> int:
    """The 1-based line of the first line containing text."""
    return next(n for n, line in enumerate(code.splitlines(), start=1) if text in line)


def placement(learner, slug: str, code: str) -> dict:
    """Grade the code through the API; return the stored verdict."""
    response = learner.post(f"/api/exercises/{slug}/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    learner.get(response.json()["events"])  # the stream ends with the verdict
    return learner.get(response.json()["url"]).json()


# (marker text on the line, event, device) per solution: everything the map holds, and nothing else
SOLUTIONS = {
    "same-device": [("weights = torch.randn", "created_on_device", "cuda:0"),
                    ("x = x.to(device)", "to_device", "cuda:0"), ('print("y ="', "sync", "cuda:0")],
    "training-loop": [("nn.Linear(16, 1)).to(device)", "to_device", "cuda:0"),
                      ("xb, yb = xb.to(device)", "to_device", "cuda:0"), ("loss.item()", "sync", "cuda:0")],
    "model-internals": [("torch.arange", "created_on_device", "cuda:0"), ("SequenceScorer().to", "to_device", "cuda:0"),
                        ("batch = torch.randn", "created_on_device", "cuda:0"), (".tolist()", "sync", "cuda:0")],
    "bring-it-back": [(".cpu().numpy()", "to_host", "cpu"), ("torch.ones", "created_on_device", "cuda:0")],
    "pick-device": [],
}


@pytest.mark.parametrize("slug", sorted(SOLUTIONS))
def test_each_solution_maps_its_moves_syncs_and_creations_to_their_lines(learner, slug):
    code = source(slug, "solution.py")
    verdict = placement(learner, slug, code)
    assert verdict["status"] == "passed"
    got = {(e["line"], e["event"], e["device"]) for e in verdict["placement"]}
    assert got == {(line_of(code, text), event, device) for text, event, device in SOLUTIONS[slug]}
    assert verdict["placement_totals"]["mismatches"] == 0


def test_the_training_loop_solution_counts_every_batch_and_names_it(learner):
    code = source("training-loop", "solution.py")
    entries = {e["line"]: e for e in placement(learner, "training-loop", code)["placement"]}
    batches = entries[line_of(code, "xb, yb = xb.to(device)")]
    assert batches["names"] == ["xb", "yb"] and batches["shape"] == [32, 1] and batches["count"] == 40
    assert batches["bytes"] == 40 * 32 * 4 and batches["in_loop"]
    model = entries[line_of(code, "nn.Linear(16, 1)).to(device)")]
    assert model["module"] == "Sequential" and model["names"] == ["model"] and not model["in_loop"]
    sync = entries[line_of(code, "loss.item()")]
    assert sync["count"] == 5 and sync["ops"] == ["item"] and sync["in_loop"]


def test_a_wrong_answer_marks_the_models_move_and_the_line_where_two_devices_met(learner):
    code = source("training-loop", "wrong/batch_not_moved.py")
    verdict = placement(learner, "training-loop", code)
    got = {(e["line"], e["event"]) for e in verdict["placement"]}
    assert got == {(line_of(code, ".to(device)  # once"), "to_device"),
                   (line_of(code, "loss_fn(model(xb)"), "mismatch")}
    mismatch = next(e for e in verdict["placement"] if e["event"] == "mismatch")
    assert mismatch["device"] == "cpu and cuda:0" and "xb" in mismatch["names"]
    assert verdict["placement_totals"]["mismatches"] == 1


def test_printing_the_loss_tensor_every_epoch_is_a_sync_inside_the_loop(learner):
    code = source("training-loop", "wrong/prints_loss_tensor.py")
    verdict = placement(learner, "training-loop", code)
    sync = next(e for e in verdict["placement"] if e["event"] == "sync")
    assert sync["line"] == line_of(code, 'print(f"epoch {epoch}: loss", loss)')
    assert sync["ops"] == ["print"] and sync["count"] == 5 and sync["in_loop"]
    assert verdict["placement_totals"]["syncs_in_loop"] == 5
