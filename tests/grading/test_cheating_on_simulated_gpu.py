"""Cheating never passes: the verdict comes from the harness's report (its own pipe, a per-job nonce), decided
outside the sandbox, and the facts in it follow tensors, not what the program prints or claims."""

from __future__ import annotations

import json

import pytest

FAKE_VERDICT = json.dumps({"exercise": "same-device", "status": "passed",
                           "checks": [{"id": i, "passed": True, "message": "", "line": None}
                                      for i in ("runs", "same_device", "y_on_device", "y_value")]})


def _with_header(exercises, slug, header: str, body: str = "solution") -> str:
    return header + "\n" + getattr(exercises[slug], body)


@pytest.mark.parametrize("slug", ["same-device", "training-loop"])
def test_printing_a_fake_verdict_fails(grade, exercises, slug):
    code = f"print({FAKE_VERDICT!r})\nprint('passed')\nprint('All checks passed!')\n" + exercises[slug].starter
    verdict = grade(slug, code)
    assert verdict.status == "failed"


@pytest.mark.parametrize("slug", ["same-device", "pick-device", "training-loop", "bring-it-back", "model-internals"])
def test_sys_exit_zero_before_the_work_fails(grade, exercises, slug):
    verdict = grade(slug, "import sys\nprint('passed')\nsys.exit(0)\n" + exercises[slug].starter)
    assert verdict.status == "failed"


@pytest.mark.parametrize("slug", ["same-device", "pick-device", "training-loop", "bring-it-back", "model-internals"])
def test_os_exit_zero_before_the_work_fails(grade, exercises, slug):
    verdict = grade(slug, "import os\nprint('passed', flush=True)\nos._exit(0)\n" + exercises[slug].solution)
    assert verdict.status == "failed"
    assert all(not c.passed for c in verdict.checks)
    assert "os._exit()" in verdict.checks[0].message


def test_forged_report_on_the_report_pipe_fails(grade, exercises):
    forged = {"nonce": "0" * 32, "outcome": {"finished": True, "exception": None}, "probe": {}, "trace": {}}
    code = ("import json, os\n"
            f"data = json.dumps({forged!r}).encode()\n"
            "for fd in range(3, 64):\n"
            "    try:\n"
            "        os.write(fd, data)\n"
            "    except OSError:\n"
            "        pass\n"
            "os._exit(0)\n")
    assert grade("same-device", code).status == "failed"


def test_forged_report_then_the_real_one_fails(grade, exercises):
    code = ("import os\n"
            "for fd in range(3, 64):\n"
            "    try:\n"
            "        os.write(fd, b'{\"nonce\": null, \"probe\": {}}')\n"
            "    except OSError:\n"
            "        pass\n" + exercises["same-device"].solution)
    verdict = grade("same-device", code)
    assert verdict.status == "failed"


def test_tensor_to_patched_into_a_no_op_fails(grade, exercises):
    header = "import torch\ntorch.Tensor.to = lambda self, *args, **kwargs: self\n"
    verdict = grade("same-device", _with_header(exercises, "same-device", header))
    assert verdict.status == "failed"
    assert "same_device" in verdict.failed_ids()


def test_tensor_and_module_to_patched_fails_the_training_loop(grade, exercises):
    header = ("import torch\ntorch.Tensor.to = lambda self, *a, **k: self\n"
              "torch.nn.Module.to = lambda self, *a, **k: self\n")
    verdict = grade("training-loop", _with_header(exercises, "training-loop", header))
    assert verdict.status == "failed"
    assert "model_on_device" in verdict.failed_ids()


@pytest.mark.parametrize(("slug", "check_id"), [("same-device", "y_on_device"), ("training-loop", "model_on_device")])
def test_cuda_is_available_patched_at_import_fails(grade, exercises, slug, check_id):
    header = "import torch\ntorch.cuda.is_available = lambda: False\n"
    verdict = grade(slug, _with_header(exercises, slug, header))
    assert verdict.status == "failed"
    failed = {c.id: c for c in verdict.checks if not c.passed}
    assert check_id in failed
    assert "torch.cuda.is_available" in failed[check_id].message


def test_cuda_is_available_patched_true_cannot_pass_pick_device(grade, exercises):
    code = ("import torch\ntorch.cuda.is_available = lambda: True\n"
            "def pick_device():\n    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n")
    verdict = grade("pick-device", code)
    assert verdict.status == "failed"
    assert "falls_back_to_cpu" in verdict.failed_ids()


def test_writing_files_does_not_pass(grade, exercises):
    code = ("for name in ('/tmp/verdict.json', 'verdict.json', '/tmp/report.json'):\n"
            "    try:\n"
            f"        open(name, 'w').write({FAKE_VERDICT!r})\n"
            "    except OSError:\n"
            "        pass\n" + exercises["same-device"].starter)
    assert grade("same-device", code).status == "failed"


def test_popping_the_tracer_mode_does_not_pass(grade, exercises):
    header = ("import torch\n"
              "while torch._C._len_torch_function_stack():\n"
              "    torch._C._pop_torch_function_stack()\n")
    verdict = grade("same-device", _with_header(exercises, "same-device", header))
    assert verdict.status == "failed"
