"""model-internals through the real sandbox on a simulated GPU: messages name the learner's line and attribute, the
probe's trial on the meta device leaves the learner's own trace alone, and models built inside a function count."""

from __future__ import annotations

from app.core.config import ROOT

WRONG = ROOT / "exercises/model-internals/wrong"


def _by_id(verdict):
    return {c.id: c for c in verdict.checks}


def _line_of(code: str, text: str) -> int:
    return next(n for n, line in enumerate(code.splitlines(), 1) if text in line)


def test_starter_names_the_plain_attribute_and_the_host_made_tensor(grade, exercises):
    code = exercises["model-internals"].starter
    checks = _by_id(grade("model-internals", code))
    forward_line = _line_of(code, "x = (x - self.mean) / self.std")
    assert checks["same_device"].line == forward_line
    assert "`self.mean` (on cpu) and `x` (on cuda:0) met" in checks["same_device"].message
    assert 'self.register_buffer("mean", ...)' in checks["same_device"].message
    assert checks["buffer_registered"].line == _line_of(code, "self.mean = torch.linspace")
    assert "`self.mean` and `self.std` of `SequenceScorer` are plain tensor attributes" in \
        checks["buffer_registered"].message
    assert checks["created_on_input_device"].line == _line_of(code, "positions = torch.arange")
    assert "device=x.device" in checks["created_on_input_device"].message


def test_a_tensor_made_on_a_fixed_device_fails_only_its_own_check(grade):
    # this program runs cleanly on the simulated GPU; only the trial on meta shows the fixed device, and the
    # trial must not leave mismatches or forward calls in the learner's own trace
    for name in ("positions_on_global_device.py", "positions_copied_every_call.py"):
        verdict = grade("model-internals", (WRONG / name).read_text())
        assert verdict.failed_ids() == ["created_on_input_device"], (name, verdict.checks)


def test_host_made_tensor_in_the_run_is_traced_to_its_line(grade):
    code = (WRONG / "only_buffers_fixed.py").read_text()
    same = _by_id(grade("model-internals", code))["same_device"]
    made = _line_of(code, "positions = torch.arange")
    assert same.line == made + 1
    assert f"`positions` was made at line {made} by `torch.arange` on the host" in same.message


def test_model_built_inside_main_is_still_examined(grade, exercises):
    # the learner's model is gone when the program ends; the probe builds one from the class instead
    classes = exercises["model-internals"].starter.split("torch.manual_seed(0)")[0]
    code = classes + "def main():\n    print(SequenceScorer().mean.device)\n\n\nmain()\n"
    checks = _by_id(grade("model-internals", code))
    assert checks["runs"].passed
    assert not checks["buffer_registered"].passed and "plain tensor attributes" in checks["buffer_registered"].message
    assert not checks["created_on_input_device"].passed


def test_no_model_at_all_fails_with_a_reason(grade):
    verdict = grade("model-internals", "import torch\nprint(torch.ones(2))\n")
    checks = _by_id(verdict)
    assert checks["runs"].passed and checks["same_device"].passed
    assert "no model of yours" in checks["buffer_registered"].message
    assert "no model of yours" in checks["created_on_input_device"].message


def test_tensors_kept_on_the_class_are_found_and_do_not_hide_the_forward_trial(grade, exercises):
    code = exercises["model-internals"].starter
    for line in ("        self.mean = torch.linspace(-1.0, 1.0, features)\n",
                 "        self.std = torch.linspace(0.5, 2.0, features)\n"):
        code = code.replace(line, "")
    code = code.replace("    def __init__(self, features=8, max_length=16):",
                        "    mean = torch.linspace(-1.0, 1.0, 8)  # shared by every instance, moved by nothing\n"
                        "    std = torch.linspace(0.5, 2.0, 8)\n\n"
                        "    def __init__(self, features=8, max_length=16):")
    checks = _by_id(grade("model-internals", code))
    assert checks["buffer_registered"].line == _line_of(code, "mean = torch.linspace")
    assert "`self.mean` and `self.std`" in checks["buffer_registered"].message
    # the trial puts class tensors on meta too, so it still reaches the host-made positions
    assert checks["created_on_input_device"].line == _line_of(code, "positions = torch.arange")
