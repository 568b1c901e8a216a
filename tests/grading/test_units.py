"""Pure units: torch's mismatch wording, the Verdict mapping of sandbox results, the exercise schema."""

from __future__ import annotations

import pytest
import torch
import yaml

from app.content.exercises import ExerciseSpec, load_exercise, load_exercises, read_expect
from app.core.config import ROOT
from app.grading.grader import build_job, evaluate
from app.harness.wording import wording
from app.runner.base import Result

CUDA = "cuda:0"


def _word(func, args, on_accel, kwargs=None, devices=None):
    """torch's words for func(*args) with the tensors in on_accel on cuda:0 (or on devices[id(t)])."""
    placed = {id(t): CUDA for t in on_accel} | (devices or {})
    return wording.mismatch_message(func, args, kwargs or {}, lambda t: placed.get(id(t), "cpu"))


def test_simulated_gpu_linear_with_host_input_words_addmm():
    layer = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    message = _word(torch.nn.functional.linear, (x, layer.weight, layer.bias), [layer.weight, layer.bias])
    assert message == ("Expected all tensors to be on the same device, but got mat1 is on cpu, different from other "
                       "tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)")


def test_simulated_gpu_host_model_with_device_input():
    layer = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    message = _word(torch.nn.functional.linear, (x, layer.weight, layer.bias), [x])
    assert "but got mat1 is on cuda:0, different from other tensors on cpu" in message


def test_simulated_gpu_cross_entropy_host_target():
    logits, target = torch.randn(4, 3), torch.tensor([0, 1, 2, 0])
    message = _word(torch.nn.functional.cross_entropy, (logits, target), [logits])
    assert message == ("Expected all tensors to be on the same device, but got target is on cpu, different from "
                       "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_nll_loss_forward)")


def test_simulated_gpu_elementwise_words_tensor_iterator():
    a, b = torch.randn(3), torch.randn(3)
    assert _word(torch.add, (a, b), [a]) == ("Expected all tensors to be on the same device, but found at least two "
                                             "devices, cuda:0 and cpu!")
    assert _word(torch.add, (a, b), [b]).endswith("found at least two devices, cpu and cuda:0!")


def test_simulated_gpu_host_scalar_is_allowed_and_copies_are_allowed():
    a, s = torch.randn(3), torch.tensor(2.0)
    assert _word(torch.mul, (a, s), [a]) is None  # a 0-dim host tensor may meet a GPU tensor
    dst, src = torch.zeros(3), torch.randn(3)
    assert _word(torch.Tensor.copy_, (dst, src), [dst]) is None


def test_simulated_gpu_embedding_and_conv_wording():
    weight, idx = torch.randn(10, 4), torch.tensor([1, 2])
    assert "got index is on cpu" in _word(torch.nn.functional.embedding, (idx, weight), [weight])
    conv = torch.nn.Conv2d(1, 1, 3)
    x = torch.randn(1, 1, 5, 5)
    message = _word(torch.nn.functional.conv2d, (x, conv.weight, conv.bias), [conv.weight, conv.bias])
    assert message.startswith("Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be")


def test_generated_table_matches_installed_torch():
    from app.harness.wording.gen_cuda_checks import build_table

    assert build_table() == wording._TABLE


def _exercise():
    return load_exercises(ROOT / "exercises")["same-device"]


def test_verdict_timeout_for_wall_and_cpu_limits():
    ex = _exercise()
    for hit in ("wall", "cpu"):
        verdict = evaluate(ex, Result(status="limit", limit_hit=hit, message="ran 10 s"), "n")
        assert verdict.status == "timeout" and not any(c.passed for c in verdict.checks)


def test_verdict_failed_for_memory_limit_and_error_for_broken_sandbox():
    ex = _exercise()
    assert evaluate(ex, Result(status="limit", limit_hit="memory", message="used 1 GiB"), "n").status == "failed"
    broken = evaluate(ex, Result(status="error", message="the sandbox server died"), "n")
    assert broken.status == "error" and "sandbox server died" in broken.stderr


def test_verdict_without_report_or_with_wrong_nonce_fails():
    ex = _exercise()
    assert evaluate(ex, Result(status="ok", exit_code=0, report=None), "n").status == "failed"
    report = {"nonce": "other", "probe": {}, "outcome": {"finished": True}}
    assert evaluate(ex, Result(status="ok", exit_code=0, report=report), "n").status == "failed"


def test_verdict_json_shape():
    ex = _exercise()
    data = evaluate(ex, Result(status="ok", exit_code=0, report=None, stdout="hi\n"), "n").model_dump(mode="json")
    assert set(data) == {"exercise", "status", "checks", "stdout", "stderr", "duration_ms", "device", "placement",
                         "placement_totals", "advice", "timeline", "machine", "devices"}
    assert set(data["checks"][0]) == {"id", "passed", "message", "line", "reached"}


def test_job_carries_probe_and_a_fresh_nonce_beside_its_payload():
    ex = _exercise()
    (job1, nonce1), (_job2, nonce2) = build_job(ex, "pass"), build_job(ex, "pass")
    assert job1.mode == "grade" and job1.grade["probe"] == ex.probe and job1.key == nonce1
    assert nonce1 not in str(job1.payload())  # the sandboxed child gets it only after the learner's code ran
    assert nonce1 != nonce2 and len(nonce1) == 32


ISSUE_CHECKS = {
    "same-device": ["runs", "same_device", "y_on_device"],
    "pick-device": ["returns_device", "prefers_cuda", "uses_mps", "falls_back_to_cpu"],
    "training-loop": ["runs", "model_on_device", "model_moved_once", "batch_on_device", "same_device",
                      "loss_item", "trains"],
    "bring-it-back": ["returns_numpy", "handles_grad", "moved_to_host"],
    "model-internals": ["runs", "same_device", "buffer_registered", "created_on_input_device"],
}
LESSONS = {"same-device": "cpu-gpu-border", "bring-it-back": "cpu-gpu-border",
           "pick-device": "picking-a-device", "training-loop": "training-loop", "model-internals": "training-loop"}


@pytest.mark.parametrize("slug", sorted(ISSUE_CHECKS))
def test_exercise_keeps_the_issue_check_ids_and_lesson(slug):
    ex = load_exercise(ROOT / "exercises" / slug)
    assert [i for i in ex.spec.check_ids if i in ISSUE_CHECKS[slug]] == ISSUE_CHECKS[slug]
    assert ex.lesson == LESSONS[slug] and ex.probe and ex.checks_path.is_file()
    assert all(w.expect in ex.spec.check_ids for w in ex.wrong)


def test_schema_refuses_duplicate_ids_and_unknown_limits(tmp_path):
    good = yaml.safe_load((ROOT / "exercises/same-device/exercise.yaml").read_text())
    with pytest.raises(ValueError, match="repeated: runs"):
        ExerciseSpec.model_validate({**good, "checks": good["checks"] + [good["checks"][0]]})
    with pytest.raises(ValueError, match="unknown limits"):
        ExerciseSpec.model_validate({**good, "limits": {"gpus": 8}})
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "exercise.yaml").write_text("title: X\nlesson: l\nchecks: []\n")
    with pytest.raises(ValueError, match="exercise.yaml"):
        load_exercise(tmp_path / "x")


def test_exercise_asks_for_simulated_gpus_within_bounds_and_its_job_carries_them():
    good = yaml.safe_load((ROOT / "exercises/same-device/exercise.yaml").read_text())
    assert ExerciseSpec.model_validate(good).gpus == 1
    for bad in (0, 9, "two"):
        with pytest.raises(ValueError, match="gpus"):
            ExerciseSpec.model_validate({**good, "gpus": bad})
    ex = _exercise()
    two = ex.model_copy(update={"spec": ex.spec.model_copy(update={"gpus": 2})})
    job, _ = build_job(two, "pass")
    assert job.payload()["host"]["gpus"] == 2 and job.payload()["host"]["build"] == "cuda"
    assert build_job(ex, "pass")[0].payload()["host"]["gpus"] == 1


def test_read_expect():
    assert read_expect("# expect: same_device\nimport torch\n") == "same_device"
    assert read_expect("import torch\n") is None


def test_exercise_limits_only_tighten():
    from app.grading.grader import exercise_limits
    from app.sandbox.job_limits import Limits

    ex = _exercise()
    base = Limits(wall_s=30.0, cpu_s=5)
    limits = exercise_limits(ex.model_copy(update={"spec": ex.spec.model_copy(update={"limits": {"wall_s": 10,
                                                                                                 "cpu_s": 20}})}), base)
    assert limits.wall_s == 10.0 and limits.cpu_s == 5 and isinstance(limits.cpu_s, int)
    assert exercise_limits(ex, None) is None


def test_launch_on_several_machines_counts_every_rank_and_gives_each_machine_its_gpus():
    good = yaml.safe_load((ROOT / "exercises/same-device/exercise.yaml").read_text())
    spec = ExerciseSpec.model_validate({**good, "gpus": 2, "launch": {"nnodes": 2, "nproc_per_node": 2}})
    assert (spec.nproc, spec.nnodes) == (4, 2)  # gpus is per machine: rank r's GPU is cuda:LOCAL_RANK
    with pytest.raises(ValueError, match="10 ranks"):
        ExerciseSpec.model_validate({**good, "gpus": 5, "launch": {"nnodes": 2, "nproc_per_node": 5}})
    with pytest.raises(ValueError, match="nnodes"):
        ExerciseSpec.model_validate({**good, "gpus": 2, "launch": {"nnodes": 0, "nproc_per_node": 2}})
    ex = _exercise()
    job, _ = build_job(ex.model_copy(update={"spec": spec}), "pass")
    assert (job.payload()["nproc"], job.payload()["nnodes"], job.payload()["host"]["gpus"]) == (4, 2, 2)
    assert job.payload()["launcher"] is None  # torchrun
    acc = ExerciseSpec.model_validate({**good, "gpus": 2, "launch": {"launcher": "accelerate", "nproc_per_node": 2}})
    assert acc.launcher == "accelerate"
    assert build_job(ex.model_copy(update={"spec": acc}), "pass")[0].launcher == "accelerate"
    with pytest.raises(ValueError, match="launcher"):
        ExerciseSpec.model_validate({**good, "launch": {"launcher": "mpirun", "nproc_per_node": 1}})


def test_placement_map_of_several_ranks_has_a_section_per_rank():
    from app.grading.placement_map import placement_map

    line = {"line": 3, "event": "to_device", "device": "cuda:0", "count": 2, "names": ["xb"], "bytes": 8}
    ranks = [{"rank": r, "local_rank": r % 2, "node": r // 2,
              "trace": {"lines": [{**line, "device": f"cuda:{r % 2}"}]}} for r in (1, 0, 3, 2)]
    entries, totals = placement_map({"trace": {"lines": [line]}, "ranks": ranks}, "x = 1\n")
    assert [(e.rank_label, e.device) for e in entries] == [
        ("rank 0 (node0, local rank 0)", "cuda:0"), ("rank 1 (node0, local rank 1)", "cuda:1"),
        ("rank 2 (node1, local rank 0)", "cuda:0"), ("rank 3 (node1, local rank 1)", "cuda:1")]
    assert totals.to_device == 8
    one, _ = placement_map({"trace": {"lines": [line]}}, "x = 1\n")
    assert [(e.rank, e.rank_label) for e in one] == [(None, None)]


def test_one_verdict_parses_the_learners_code_once():
    from app.grading.syntax import syntax_tree

    code = "import torch\nx = torch.ones(2)\n"
    assert syntax_tree(code) is syntax_tree(code) and syntax_tree(code + "y = x\n") is not syntax_tree(code)
    assert syntax_tree("def f(:\n") is None


def test_code_read_ahead_is_held_for_its_verdict_after_the_cache_moved_on():
    """A live submission parses its code while the job runs (Grading.read_source); when its verdict is decided,
    many other programs may have been parsed since, and the tree and nodes it reads are still those read ahead."""
    from app.grading.syntax import TREES_KEPT, holding, read_ahead, syntax_nodes, syntax_tree

    code = "import torch\nfor i in range(3):\n    x = torch.ones(2)\n"
    source = read_ahead(code)
    for i in range(TREES_KEPT + 1):  # the class's other programs
        syntax_nodes(f"y = {i}\n")
    with holding(source):
        assert syntax_tree(code) is source.tree and syntax_nodes(code) == source.nodes
        assert syntax_tree("y = 0\n") is not source.tree  # only its own code is answered from it
    assert syntax_tree(code) is not source.tree  # parsed again: the cache had let it go
    with holding(read_ahead("def f(:\n")):
        assert syntax_tree("def f(:\n") is None and syntax_nodes("def f(:\n") == ()


def test_the_nodes_of_some_classes_are_those_a_walk_finds_in_its_order():
    """The verdict's readings of the code ask for the nodes of a few classes (syntax_nodes_of) instead of testing
    every node: they get what testing every node in ast.walk's order gave, for every exercise's files."""
    import ast

    from app.grading.check_messages import WITH_BLOCKS
    from app.grading.placement_map import LOOPS
    from app.grading.syntax import syntax_nodes, syntax_nodes_of

    asked = [LOOPS, (ast.Assign, ast.AnnAssign, ast.AugAssign), (ast.Call,), WITH_BLOCKS, (ast.stmt,)]
    sources = [path.read_text() for path in sorted((ROOT / "exercises").glob("*/*.py"))] + ["def f(:\n", None]
    for code in sources:
        for classes in asked:
            assert syntax_nodes_of(code, *classes) == [n for n in syntax_nodes(code) if isinstance(n, classes)]
