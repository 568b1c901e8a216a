"""Units of outcome.py: what counts when a run on a GPU host and a run under the simulation are compared."""

from __future__ import annotations

from tests.support.outcome import differences, last_exception, metadata, normalise, outcome_of

TRACEBACK = """Traceback (most recent call last):
  File "x.py", line 3, in <module>
    x = x.to("cuda:1")
        ^^^^^^^^^^^^^^
torch.AcceleratorError: CUDA error: invalid device ordinal
GPU device may be out of range, do you have enough GPUs?
"""


def test_floats_addresses_and_gpu_names_do_not_count():
    assert normalise("epoch 3: loss 0.1234, lr 1e-05") == "epoch 3: loss <f>, lr <f>"  # integers count
    assert normalise("tensor([ 1.5410, -0.2934], device='cuda:1')") == "tensor([ <f>, <f>], device='cuda:1')"
    assert normalise("<torch.cuda.Stream device=cuda:0 cuda_stream=0x5c0010>") == \
        "<torch.cuda.Stream device=cuda:0 cuda_stream=<hex>>"
    assert normalise("running on NVIDIA H200", gpu_name="NVIDIA H200") == "running on <gpu>"
    assert normalise("cuda:0 torch.Size([4, 2]) 4194304 True") == "cuda:0 torch.Size([4, 2]) 4194304 True"


def test_the_last_exception_is_its_printed_type_and_first_line():
    assert last_exception(TRACEBACK) == {"type": "torch.AcceleratorError",
                                         "message": "CUDA error: invalid device ordinal"}
    assert last_exception("some warning\n") is None


def test_differences_name_the_line():
    expected = {"stdout": ["cuda:0", "True"], "exception": None}
    assert differences(expected, outcome_of("cuda:0\nTrue\n", "")) == []
    assert differences(expected, outcome_of("cpu\nTrue\n", "")) == ["stdout line 1: expected 'cuda:0', got 'cpu'"]


def test_metadata_reads_the_gpus_a_program_needs():
    assert metadata("# fidelity: gpus=2\nimport torch\n") == {"gpus": 2, "machine": None}
    assert metadata('"""doc"""\nimport torch\n') == {"gpus": 1, "machine": None}
    assert metadata("# fidelity: machine=mac-m3-max\nimport torch\n")["machine"] == "mac-m3-max"
