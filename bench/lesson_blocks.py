"""A lesson block's Run in the page: POST to its last output line, beside an exercise run in the same run.

What a reader waits for when pressing Run under a lesson's code block (issue 27): POST
/api/lessons/cpu-gpu-border/blocks/N/runs (the `.to(device)` block, on one H100, the default), then the SSE stream
until its last `output` event (and its `done`), against the real site under uvicorn (production mode, its own
SQLite file, the embedded sandbox runner). Beside it, interleaved in the same run on the same server, an exercise
run: same-device's solution, POST to its verdict (bench/live.py's path). A block's run is a plain job and stores
nothing; an exercise run is graded (probe, checks) and stored.

Run alone with `python -m bench lesson_blocks`; `make bench` runs it with the others.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import httpx

from app import ROOT
from bench.grading import PAUSE_S
from bench.live import learner_client, percentile, submit_and_wait
from tests.support.servers import site_server

LESSON = "cpu-gpu-border"
BLOCK_TEXT = "batch = batch.to(device)"  # the block whose output names the machine's device
EXERCISE = "same-device"
RUNS = 20
WARMUP = 3
RESULTS = ROOT / "bench" / "results" / "lesson_blocks.json"


def block_number() -> int:
    """The number of the lesson's runnable block that holds BLOCK_TEXT, as the page numbers them."""
    from app.content.lessons import load_lesson

    lesson = next(p for p in (ROOT / "lessons").glob("*.md") if load_lesson(p)[0].slug == LESSON)
    blocks = load_lesson(lesson)[0].runnable_blocks
    return next(i for i, block in enumerate(blocks, 1) if BLOCK_TEXT in block.code)


def run_block(client: httpx.Client, number: int) -> tuple[float, float, dict, list[str]]:
    """Run the block once; return (ms to the last output event, ms to `done`, the done event, stdout lines).
    It first pauses as submit_and_wait does (bench.live says why), so both paths meet a refilled sandbox."""
    time.sleep(PAUSE_S)
    start = time.perf_counter()
    response = client.post(f"/api/lessons/{LESSON}/blocks/{number}/runs", json={})
    response.raise_for_status()
    last_output, event, printed = None, None, []
    with client.stream("GET", response.json()["events"]) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "output":
                last_output = time.perf_counter()
                printed += [item["line"] for item in json.loads(line[6:])["lines"] if item["stream"] == "stdout"]
            elif line.startswith("data: ") and event == "done":
                done_at = time.perf_counter()
                return ((last_output or done_at) - start) * 1000, (done_at - start) * 1000, json.loads(line[6:]), \
                    printed
    raise RuntimeError("the event stream ended without `done`")


def run() -> dict:
    """Measure both paths, interleaved, on one site; return the figures (also written to JSON)."""
    code = (ROOT / "exercises" / EXERCISE / "solution.py").read_text(encoding="utf-8")
    number = block_number()
    blocks, exercises = [], []
    with tempfile.TemporaryDirectory() as tmp, site_server(
            Path(tmp), until_ready=True, COURSE_SUBMISSION_RATE_LIMIT="10000/minute",
            COURSE_SUBMISSION_ADDRESS_RATE_LIMIT="10000/minute") as (base, _proc):
        with learner_client(base) as client:
            for _ in range(WARMUP):
                run_block(client, number)
                submit_and_wait(client, code, EXERCISE)
            for _ in range(RUNS):
                blocks.append(run_block(client, number))
                exercises.append(submit_and_wait(client, code, EXERCISE))
    to_output = [b[0] for b in blocks]
    figures = {
        "runs": RUNS,
        "block_run_p50_ms": round(percentile(to_output, 50), 1),
        "block_run_p95_ms": round(percentile(to_output, 95), 1),
        "block_run_done_p50_ms": round(percentile([b[1] for b in blocks], 50), 1),
        "block_sandbox_p50_ms": round(percentile([b[2]["duration_ms"] for b in blocks], 50), 1),
        "block_machine": blocks[-1][2]["machine"],
        "block_printed": blocks[-1][3],
        "block_statuses": sorted({b[2]["status"] for b in blocks}),
        "exercise_run_p50_ms": round(percentile([e[0] for e in exercises], 50), 1),
        "exercise_run_p95_ms": round(percentile([e[0] for e in exercises], 95), 1),
        "exercise_statuses": sorted({e[1]["status"] for e in exercises}),
    }
    figures["block_over_exercise"] = round(figures["block_run_p50_ms"] / figures["exercise_run_p50_ms"], 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def print_table(figures: dict) -> None:
    rows = [
        (f"lesson-block Run to last output, {LESSON} on {figures['block_machine']} (p50 / p95)",
         f"{figures['block_run_p50_ms']:.1f} / {figures['block_run_p95_ms']:.1f} ms"),
        ("  to its `done` (p50)", f"{figures['block_run_done_p50_ms']:.1f} ms"),
        ("  of which the sandbox job (p50)", f"{figures['block_sandbox_p50_ms']:.1f} ms"),
        (f"exercise run to verdict, {EXERCISE}, same run (p50 / p95)",
         f"{figures['exercise_run_p50_ms']:.1f} / {figures['exercise_run_p95_ms']:.1f} ms"),
        ("block over exercise (p50)", f"{figures['block_over_exercise']}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    print_table(run())
