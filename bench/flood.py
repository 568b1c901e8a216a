"""An output flood: how long after the job's end its verdict reaches the page.

A learner's `while True: print("spam", i)` is stopped by the sandbox at its output limit (1 MiB) within a second
or two; what matters then is how soon the page can say so. The figure is `flood_verdict_lag_ms`: from the moment
the runner learns that the job ended (the fork server's `done` frame) to the moment an SSE client of the real
site reads the `verdict` event, p50 of RUNS floods. The site runs in this process under uvicorn (its own SQLite
file, the embedded sandbox runner) so that both moments are read from one clock: the runner's side is noted by
wrapping `LocalJobHandle._finish`, the only place a job's end arrives.

Also reported: SSE events per flood and the program's output lines (from the stored verdict), which show the
batching (one event per short interval or size, the live stream capped far below the stored output).

Run alone with `python -m bench.flood`; `make bench` runs it with the others. Target: p50 < 2000 ms.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

from app import ROOT
from bench.live import percentile
from tests.support.servers import free_port

EXERCISE = "same-device"
FLOOD = 'i = 0\nwhile True:\n    print("spam", i)\n    i += 1\n'
RUNS = 5
TARGET_P50_MS = 2000.0
RESULTS = ROOT / "bench" / "results" / "flood.json"


@contextmanager
def _site(tmp: Path):
    """Serve the real app in this process; yield (base URL, the list the runner appends job ends to)."""
    import uvicorn

    from app.core.config import Settings
    from app.core.db import upgrade
    from app.main import create_app
    from app.runner import local

    settings = Settings(env="development", secret_key="bench-" + "x" * 40, database_url=f"sqlite:///{tmp / 'f.db'}",
                        submission_rate_limit="10000/minute",
                        submission_address_rate_limit="10000/minute")
    upgrade(settings.database_url)
    ends: list[float] = []
    original = local.LocalJobHandle._finish

    def finish(handle, result):  # the job's end, as the runner learns it
        ends.append(time.perf_counter())
        original(handle, result)

    local.LocalJobHandle._finish = finish
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the site did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", ends
    finally:
        local.LocalJobHandle._finish = original
        server.should_exit = True
        thread.join(30)


def flood_once(client: httpx.Client, ends: list[float]) -> dict:
    """Submit the flood, read its events to the verdict; return the lag, the events and the output's size."""
    response = client.post(f"/api/exercises/{EXERCISE}/submissions", json={"code": FLOOD})
    response.raise_for_status()
    before = len(ends)
    events, kind, verdict_at, verdict = 0, None, None, None
    with client.stream("GET", response.json()["events"]) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
                events += 1
            elif line.startswith("data: ") and kind == "verdict":
                verdict_at = time.perf_counter()
                verdict = json.loads(line[6:])
                break
    if verdict_at is None or len(ends) <= before:
        raise RuntimeError("the flood's stream ended without a verdict")
    return {"lag_ms": (verdict_at - ends[before]) * 1000, "events": events, "status": verdict["status"],
            "lines": verdict["stdout"].count("\n") + verdict["stderr"].count("\n")}


def run() -> dict:
    """Flood RUNS times through the real site; return the figures (also written to JSON)."""
    with tempfile.TemporaryDirectory() as tmp, _site(Path(tmp)) as (base, ends):
        with httpx.Client(base_url=base, timeout=120) as client:
            client.headers["X-CSRF-Token"] = client.get("/api/auth/csrf").json()["csrf_token"]
            client.post(f"/api/exercises/{EXERCISE}/submissions", json={"code": "print(1)"})  # warm the sandbox
            samples = [flood_once(client, ends) for _ in range(RUNS)]
    lags = [s["lag_ms"] for s in samples]
    figures = {"flood_runs": RUNS, "flood_verdict_lag_ms": round(percentile(lags, 50), 1),
               "flood_verdict_lag_max_ms": round(max(lags), 1),
               "flood_events_p50": statistics.median(s["events"] for s in samples),
               "flood_output_lines_p50": statistics.median(s["lines"] for s in samples),
               "flood_statuses": sorted({s["status"] for s in samples}),
               "flood_target_p50_ms": TARGET_P50_MS}
    figures["flood_meets_target"] = figures["flood_verdict_lag_ms"] < TARGET_P50_MS
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def print_table(figures: dict) -> None:
    """Print the figures as a small table."""
    rows = [("job's end -> verdict event, p50 / max (ms)",
             f"{figures['flood_verdict_lag_ms']:.1f} / {figures['flood_verdict_lag_max_ms']:.1f}"),
            ("SSE events per flood (p50)", f"{figures['flood_events_p50']:.0f}"),
            ("output lines per flood, stored (p50)", f"{figures['flood_output_lines_p50']:.0f}"),
            (f"target p50 < {TARGET_P50_MS:.0f} ms", "met" if figures["flood_meets_target"] else "NOT met")]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    print_table(run())
