"""Units of the simulated host (no sandbox, no patched torch): ordinals, device counts, and torch's words for
tensors on two different simulated GPUs. The GPUs are simulated: this host has none."""

from __future__ import annotations

import pytest
import torch

from app.harness.contract import DEFAULT_HOST, PLAIN_CPU, SimulatedHost, host_for
from app.harness.machine.devices import Devices
from app.harness.wording import messages, wording

ONE_GPU, TWO_GPUS = SimulatedHost(build="cuda", gpus=1), SimulatedHost(build="cuda", gpus=2)


def _word(func, args, devices: dict, kwargs=None):
    """torch's words for func(*args) with each tensor on devices[id(t)] (the host when absent)."""
    return wording.mismatch_message(func, args, kwargs or {}, lambda t: devices.get(id(t), "cpu"))


def test_simulated_gpu_invalid_ordinal_raises_cudas_error(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    devices = Devices(ONE_GPU)
    devices.check(0)
    with pytest.raises(torch.AcceleratorError) as raised:
        devices.check(1)
    assert str(raised.value).splitlines()[:2] == ["CUDA error: invalid device ordinal",
                                                  "GPU device may be out of range, do you have enough GPUs?"]
    Devices(TWO_GPUS).check(1)  # a second GPU exists there


def test_simulated_gpus_count_what_cuda_visible_devices_shows_until_cuda_starts(monkeypatch):
    devices = Devices(TWO_GPUS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert devices.count() == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,7")  # trimmed at the first GPU the machine lacks
    assert devices.count() == 2
    devices.init()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.count() == 2  # fixed once CUDA has started


def test_simulated_cuda_build_without_gpus_fails_as_a_real_one(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(RuntimeError, match="^Found no NVIDIA driver on your system"):
        Devices(SimulatedHost(build="cuda", gpus=0)).init()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match="^No CUDA GPUs are available$"):
        Devices(ONE_GPU).init()
    with pytest.raises(AssertionError, match=messages.NOT_COMPILED):
        Devices(SimulatedHost(build="macos-arm64", gpus=0, mps=True)).init()


def test_simulated_gpu_labels_name_ordinals_and_the_current_device():
    devices = Devices(TWO_GPUS)
    assert [devices.label(0), devices.label("cuda"), devices.label("cuda:1"), devices.label(torch.device("cpu"))] \
        == ["cuda:0", "cuda:0", "cuda:1", "cpu"]
    devices.current = 1
    assert devices.label("cuda") == "cuda:1" and devices.label(torch.device("cuda", 0)) == "cuda:0"
    assert Devices(SimulatedHost(build="macos-arm64", gpus=0, mps=True)).label(0) == "mps:0"


def test_two_simulated_gpus_in_one_elementwise_op_word_tensor_iterator():
    a, b = torch.ones(3), torch.ones(3)
    assert _word(torch.add, (a, b), {id(a): "cuda:0", id(b): "cuda:1"}) == (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!")
    s = torch.tensor(2.0)  # only a *host* scalar may meet a GPU tensor; a scalar on another GPU may not
    assert "cuda:1 and cuda:0" in _word(torch.mul, (b, s), {id(b): "cuda:1", id(s): "cuda:0"})
    assert _word(torch.mul, (b, torch.tensor(2.0)), {id(b): "cuda:1"}) is None


def test_two_simulated_gpus_in_linear_and_conv_word_their_checks():
    layer, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    on = {id(layer.weight): "cuda:1", id(layer.bias): "cuda:1", id(x): "cuda:0"}
    assert _word(torch.nn.functional.linear, (x, layer.weight, layer.bias), on) == (
        "Expected all tensors to be on the same device, but got mat1 is on cuda:0, different from other tensors "
        "on cuda:1 (when checking argument in method wrapper_CUDA_addmm)")
    conv, img = torch.nn.Conv2d(1, 1, 3), torch.randn(1, 1, 5, 5)
    on = {id(conv.weight): "cuda:0", id(conv.bias): "cuda:0", id(img): "cuda:1"}
    assert _word(torch.nn.functional.conv2d, (img, conv.weight, conv.bias), on) == (
        "Expected tensor for argument #1 'input' to have the same device as tensor for argument #2 'weight'; "
        "but device 1 does not equal 0 (while checking arguments for cudnn_convolution)")


def test_simulated_host_description_refuses_impossible_hosts():
    assert DEFAULT_HOST.build == "cuda" and DEFAULT_HOST.gpus == 1
    assert host_for(gpus=2).gpus == 2 and host_for(build="macos-arm64").mps
    with pytest.raises(ValueError, match="sees no CUDA GPUs"):
        SimulatedHost(build="cpu", gpus=1)
    with pytest.raises(ValueError, match="between 0 and 8"):
        SimulatedHost(gpus=9)
    # one description on both sides: what the harness reads back is the host the app sent; no host is the plain CPU
    assert SimulatedHost.from_payload(DEFAULT_HOST.payload()) == DEFAULT_HOST
    assert SimulatedHost.from_payload(None) == PLAIN_CPU and not PLAIN_CPU.simulated
    # the build's facts are data (machines/builds/): what it was compiled for, and what it lets the host have
    mac, cpu = host_for(build="macos-arm64"), host_for(build="cpu")
    assert (DEFAULT_HOST.accelerator, DEFAULT_HOST.cuda, DEFAULT_HOST.mps_built) == ("cuda", True, False)
    assert (mac.accelerator, mac.cuda, mac.mps_built, mac.devices_present()) == ("mps", False, True, 1)
    assert (cpu.accelerator, cpu.simulated, cpu.devices_present()) == (None, False, 0)
    with pytest.raises(ValueError, match="only a build with MPS"):
        SimulatedHost(build="cpu", gpus=0, mps=True)


def test_the_fork_servers_dispatch_figure_serves_every_job_and_leaves_no_mode(monkeypatch):
    """The fork server measures the tracer's per-call cost once (measure_dispatch); a job's clock then reads it
    instead of measuring it again, and the server is left with no TorchFunctionMode on its stack."""
    from torch.overrides import _get_current_function_mode_stack

    from app.harness.machine import clock
    from app.harness.tracing.placement import measure_dispatch

    monkeypatch.setattr(clock, "DISPATCH_S", None)
    calls = clock.CLOCK.calls
    figure = measure_dispatch()
    assert clock.DISPATCH_S == figure >= 0.0
    assert not _get_current_function_mode_stack() and clock.CLOCK.calls == calls
    measured = clock.DeviceClock()
    monkeypatch.setattr(clock.DeviceClock, "calibrate", lambda self: pytest.fail("measured again in the job"))
    measured.configure({"machine": "h100"})
    assert measured.dispatch_s == figure


def test_simulated_cuda_128_wheel_lists_the_architectures_pytorch_builds_it_for():
    """torch.cuda.get_arch_list() reads _cuda_getArchFlags: PyTorch builds its CUDA 12.8 wheels with
    TORCH_CUDA_ARCH_LIST "7.0;7.5;8.0;8.6;9.0;10.0;12.0" (pytorch/pytorch .ci/manywheel/build_cuda.sh)."""
    from app.harness.machine.cuda_runtime import CudaRuntime
    from app.harness.machine.memory import Memory

    assert DEFAULT_HOST.cuda_version == "12.8"
    runtime = CudaRuntime(Devices(DEFAULT_HOST), Memory(capacity=lambda gpu: DEFAULT_HOST.gpu_memory_bytes))
    flags = runtime.entry_points()["_cuda_getArchFlags"]().split()
    assert flags == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert f"sm_{DEFAULT_HOST.capability[0]}{DEFAULT_HOST.capability[1]}" in flags  # the H100 runs natively


def test_host_payload_is_asdicts_form_and_a_copy():
    """payload() is built field by field (it is on every job's submission): the same dict `dataclasses.asdict`
    gives, capability as a list, for every machine profile and build, and nothing in it shared with the host."""
    import dataclasses
    import json

    from app.harness.contract import machine_host
    from app.harness.machine import machines

    hosts = [DEFAULT_HOST, PLAIN_CPU, host_for(build="macos-arm64"), host_for(build="cpu"), host_for(gpus=2)]
    hosts += [machine_host(m) for m in sorted(machines.load_all())]
    for host in hosts:
        expected = {**dataclasses.asdict(host), "capability": list(host.capability)}
        got = host.payload()
        assert got == expected and json.dumps(got) == json.dumps(expected), host.machine
        assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]
        if host.clock:
            got["clock"]["peak_flops"]["fp32"] = 0.0
            assert host.clock["peak_flops"]["fp32"] != 0.0 and host.payload() == expected


def test_a_profiles_host_is_built_once_and_again_when_its_file_changes(tmp_path):
    """machine_host and job_host keep the host they built for a profile (every graded submission asks for one),
    and build it again from the file once it changes."""
    import json

    from app.core.config import Settings
    from app.harness.contract import job_host, machine_host
    from app.harness.machine import machines

    data = json.loads((machines.FOLDER / "t4.json").read_text())
    data["id"] = "kept-host-card"
    (tmp_path / "kept-host-card.json").write_text(json.dumps(data))
    settings = Settings(env="test", secret_key="x", sim_machines_dir=tmp_path)
    first = machine_host("kept-host-card", folder=tmp_path)
    assert machine_host("kept-host-card", folder=tmp_path) is first and first.multiprocessors == 40
    on_job = job_host(settings, machine="kept-host-card", gpus=2)
    assert job_host(settings, machine="kept-host-card", gpus=2) is on_job and on_job.gpus == 2
    assert job_host(settings, machine="kept-host-card").gpus == first.gpus  # another argument, another host
    data["multiprocessors"]["value"] = 4000
    (tmp_path / "kept-host-card.json").write_text(json.dumps(data))
    assert machine_host("kept-host-card", folder=tmp_path).multiprocessors == 4000
    assert job_host(settings, machine="kept-host-card", gpus=2).multiprocessors == 4000
