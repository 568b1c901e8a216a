"""The classic timing programs of issue 26, each a part that stands alone: what a learner times on a GPU.

Used by tests/harness/test_device_clock.py (FIGURES: every part in one program on the simulated H100, each figure
checked against what a real H100 gives) and by `make bench` (bench/clock.py: each part's wall time under the
simulation beside the same code's on the plain CPU, `host(part)`).
"""

from __future__ import annotations

PRELUDE = r'''
import json, time, torch
out = {}
def best(fn, n=3):
    return min(fn() for _ in range(n))
'''

# name -> code; each part sets its figures in `out`
PARTS: dict[str, str] = {
    # an SGD step of a small MLP, on the GPU and on the host
    "mlp_step": r'''
def mlp_step(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1024)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xb, yb = torch.randn(256, 1024, device=device), torch.randn(256, 1024, device=device)
    def step():
        opt.zero_grad(); torch.nn.functional.mse_loss(model(xb), yb).backward(); opt.step()
    step()
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter(); step()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3
out["mlp_gpu_ms"], out["mlp_host_ms"] = mlp_step("cuda"), mlp_step("cpu")
''',
    # a 1024 x 1024 fp32 matmul with and without synchronize, and the same product on the host
    "matmul_synchronized": r'''
a = torch.randn(1024, 1024, device="cuda"); b = torch.randn(1024, 1024, device="cuda")
c = a @ b; torch.cuda.synchronize()
def synced():
    t = time.perf_counter(); c = a @ b; torch.cuda.synchronize(); return (time.perf_counter() - t) * 1e3
def unsynced():
    torch.cuda.synchronize(); t = time.perf_counter(); c = a @ b; ms = (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize(); return ms
out["synced_ms"], out["unsynced_ms"] = best(synced), best(unsynced)
ha, hb = a.cpu(), b.cpu()
t = time.perf_counter(); hc = ha @ hb; out["host_ms"] = (time.perf_counter() - t) * 1e3
''',
    # ten of them back to back between two CUDA events
    "ten_matmuls_events": r'''
a = torch.randn(1024, 1024, device="cuda"); b = torch.randn(1024, 1024, device="cuda")
def events():
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        c = a @ b
    e.record(); e.synchronize(); return s.elapsed_time(e)
out["ten_events_ms"] = best(events)
''',
    # 256 MiB to the GPU from pageable and pinned memory, and pinned with non_blocking
    "copies_256mib": r'''
x = torch.empty(64 << 20)  # 256 MiB of float32
t = time.perf_counter(); y = x.to("cuda"); torch.cuda.synchronize()
out["pageable_ms"] = (time.perf_counter() - t) * 1e3
del y
xp = x.pin_memory(); del x
t = time.perf_counter(); y = xp.to("cuda"); torch.cuda.synchronize(); out["pinned_ms"] = (time.perf_counter() - t) * 1e3
del y
t = time.perf_counter(); y = xp.to("cuda", non_blocking=True); t1 = time.perf_counter(); torch.cuda.synchronize()
out["nb_call_ms"], out["nb_wait_ms"] = (t1 - t) * 1e3, (time.perf_counter() - t1) * 1e3
del y, xp
''',
    # host work and GPU work, reading a value every step against one sync at the end
    "item_loop": r'''
big_a, big_b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")  # no values kept
small = torch.ones(10, device="cuda")
def loop(every_step):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10):
        time.sleep(0.003)  # host work: 3 ms
        c = big_a @ big_b  # GPU work: 2 * 4096^3 = 137 GFLOP, about 3 ms
        if every_step:
            small.sum().item()  # the loss, read every step
    torch.cuda.synchronize(); return (time.perf_counter() - t) * 1e3
out["item_every_step_ms"], out["one_sync_ms"] = loop(True), loop(False)
''',
    "sleep": r'''
t = time.perf_counter(); time.sleep(0.05); out["sleep_ms"] = (time.perf_counter() - t) * 1e3
''',
}

END = "print(json.dumps(out))\n"

# every part in one program (tests/harness/test_device_clock.py)
FIGURES = PRELUDE + "".join(PARTS.values()) + END

# what stands in for CUDA on the plain CPU, so that the same code runs there: synchronize waits for nothing, an
# event stamps the host's clock, pinning is a no-op
CPU_STAND_INS = r'''
class _Event:
    def __init__(self, enable_timing=False):
        self.t = 0.0
    def record(self, stream=None):
        self.t = time.perf_counter()
    def synchronize(self):
        pass
    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3
torch.cuda.Event = _Event
torch.cuda.synchronize = lambda device=None: None
torch.Tensor.pin_memory = lambda self, device=None: self
'''


def program(part: str) -> str:
    """One part as a program of its own, for the simulated GPU."""
    return PRELUDE + PARTS[part] + END


def host(part: str) -> str:
    """The same part on the plain CPU: the device "cuda" is "cpu", CUDA's calls the stand-ins above."""
    return PRELUDE + CPU_STAND_INS + PARTS[part].replace('"cuda"', '"cpu"') + END
