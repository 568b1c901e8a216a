"""Turn every benchmark's figures into the side-by-side summary: bench/results/summary.json and summary.md.

Each headline figure sits next to the baseline measured in the same run and the target it must meet. The
flat keys of summary.json are a contract (issue 7); the per-module figures stay under their module's name.
"""

from __future__ import annotations

from typing import Any


def _get(summary: dict, path: str) -> Any:
    node: Any = summary
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def headline(summary: dict) -> dict:
    """Return the flat headline figures (None where a benchmark did not run)."""
    g = lambda path: _get(summary, path)  # noqa: E731
    out = {
        "sandbox_warm_p50_ms": g("sandbox.warm.p50_ms"),
        "sandbox_warm_p95_ms": g("sandbox.warm.p95_ms"),
        "sandbox_cold_p50_ms": g("sandbox.cold.p50_ms"),
        "sandbox_cold_p95_ms": g("sandbox.cold.p95_ms"),
        "sandbox_jobs_per_s_c2": g("sandbox.throughput.c2.jobs_per_s"),
        "sandbox_jobs_per_s_c8": g("sandbox.throughput.c8.jobs_per_s"),
        "idle_child_uss_mb": g("sandbox.memory.idle_child_uss_mb"),
        "grade_training_loop_p50_ms": g("live.submission_p50_ms"),
        "grade_training_loop_p95_ms": g("live.submission_p95_ms"),
        "grade_cold_subprocess_p50_ms": g("live.cold_subprocess_p50_ms"),
        "course_grade_training_loop_p50_ms": g("grading.grade_training_loop_p50_ms"),
        "page_rps": g("pages.page_rps"),
        "plain_rps": g("pages.plain_rps"),
        "page_p99_ms": g("pages.page_p99_ms"),
        "plain_p99_ms": g("pages.plain_p99_ms"),
        "verdicts_per_s": g("load.verdicts_per_s"),
        "submission_p50_ms": g("load.submission_p50_ms"),
        "submission_p95_ms": g("load.submission_p95_ms"),
        "lost_submissions": g("load.lost_submissions"),
        "hostile_page_p99_ms": g("hostile.hostile_page_p99_ms"),
        "quiet_page_p99_ms": g("hostile.quiet_page_p99_ms"),
        "plain_job_training_loop_p50_ms": g("grading.plain_job_p50_ms"),
        "grading_overhead_p50_ms": g("grading.grading_overhead_p50_ms"),
        "sim_fidelity": g("fidelity.sim_fidelity"),
        "fidelity_programs": g("fidelity.programs"),
        "celery_submit_p50_ms": g("workers.celery_submit_p50_ms"),
        "local_submit_p50_ms": g("workers.local_submit_p50_ms"),
        "celery_submit_overhead_ms": g("workers.celery_submit_overhead_ms"),
        "celery_verdicts_per_s_1w": g("workers.celery_verdicts_per_s_1w"),
        "celery_verdicts_per_s_2w": g("workers.celery_verdicts_per_s_2w"),
        "ddp_submit_p50_ms": g("ddp.ddp_submit_p50_ms"),
        "ddp_submit_p95_ms": g("ddp.ddp_submit_p95_ms"),
        "ddp_cold_torchrun_p50_ms": g("ddp.ddp_cold_torchrun_p50_ms"),
        "ddp_cold_torchrun_cpu_p50_ms": g("ddp.ddp_cold_torchrun_cpu_p50_ms"),
        "flood_verdict_lag_ms": g("flood.flood_verdict_lag_ms"),
        "flood_events": g("flood.flood_events_p50"),
        "flood_output_lines": g("flood.flood_output_lines_p50"),
    }
    for slug in ("same_device", "pick_device", "bring_it_back"):
        out[f"grade_{slug}_p50_ms"] = g(f"live.submission_{slug}_p50_ms")
        out[f"grade_{slug}_p95_ms"] = g(f"live.submission_{slug}_p95_ms")
    out["sandbox_speedup"] = _ratio(out["sandbox_cold_p50_ms"], out["sandbox_warm_p50_ms"])
    out["grade_training_loop_speedup"] = _ratio(out["grade_cold_subprocess_p50_ms"], out["grade_training_loop_p50_ms"])
    out["ddp_submit_speedup"] = _ratio(out["ddp_cold_torchrun_p50_ms"], out["ddp_submit_p50_ms"])
    out["page_throughput_ratio"] = _ratio(out["page_rps"], out["plain_rps"])
    out["hostile_p99_ratio"] = _ratio(out["hostile_page_p99_ms"], out["quiet_page_p99_ms"])
    return out


# (label, figure key, baseline key, ratio key, target text, check)
ROWS = [
    ("sandbox job, warm p50 (ms)", "sandbox_warm_p50_ms", "sandbox_cold_p50_ms", "sandbox_speedup",
     ">= 30x faster than cold", lambda h: (h["sandbox_speedup"] or 0) >= 30),
    ("sandbox job, warm p95 (ms)", "sandbox_warm_p95_ms", "sandbox_cold_p95_ms", None, "", None),
    ("sandbox jobs/s, 2 concurrent", "sandbox_jobs_per_s_c2", None, None, "", None),
    ("sandbox jobs/s, 8 concurrent", "sandbox_jobs_per_s_c8", None, None, "", None),
    ("idle warm child USS (MB)", "idle_child_uss_mb", None, None, "< 30 MB",
     lambda h: (h["idle_child_uss_mb"] or 99) < 30),
    ("HTTP grade training-loop p50 (ms)", "grade_training_loop_p50_ms", "grade_cold_subprocess_p50_ms",
     "grade_training_loop_speedup", "< 150 ms", lambda h: (h["grade_training_loop_p50_ms"] or 1e9) < 150),
    ("HTTP grade training-loop p95 (ms)", "grade_training_loop_p95_ms", None, None, "", None),
    ("HTTP grade same-device p50 / p95 (ms)", "grade_same_device_p50_ms", "grade_same_device_p95_ms", None, "", None),
    ("HTTP grade pick-device p50 / p95 (ms)", "grade_pick_device_p50_ms", "grade_pick_device_p95_ms", None, "", None),
    ("HTTP grade bring-it-back p50 / p95 (ms)", "grade_bring_it_back_p50_ms", "grade_bring_it_back_p95_ms", None, "",
     None),
    ("HTTP grade ddp-training (2 ranks) p50 (ms) vs cold torchrun --nproc-per-node=2", "ddp_submit_p50_ms",
     "ddp_cold_torchrun_p50_ms", "ddp_submit_speedup", "< 1 s and >= 5x faster than cold",
     lambda h: (h["ddp_submit_p50_ms"] or 1e9) < 1000 and (h["ddp_submit_speedup"] or 0) >= 5),
    ("HTTP grade ddp-training p95 (ms) vs cold torchrun of the CPU port p50", "ddp_submit_p95_ms",
     "ddp_cold_torchrun_cpu_p50_ms", None, "", None),
    ("`course grade` training-loop, warm p50 (ms) vs plain run job", "course_grade_training_loop_p50_ms",
     "plain_job_training_loop_p50_ms", None, "", None),
    ("simulated GPU fidelity (share of the corpus that matches) vs corpus programs", "sim_fidelity",
     "fidelity_programs", None, ">= 0.95", lambda h: (h["sim_fidelity"] or 0) >= 0.95),
    ("lesson page requests/s @64", "page_rps", "plain_rps", "page_throughput_ratio", ">= 0.7 of plain",
     lambda h: (h["page_throughput_ratio"] or 0) >= 0.7),
    ("lesson page p99 @64 (ms)", "page_p99_ms", "plain_p99_ms", None, "", None),
    ("verdicts/s, 32 submitters", "verdicts_per_s", None, None, "", None),
    ("submission p95 under load (ms)", "submission_p95_ms", None, None, "", None),
    ("lost submissions", "lost_submissions", None, None, "0", lambda h: h["lost_submissions"] == 0),
    ("submit until 202, p50 (ms): celery tier vs local runner", "celery_submit_p50_ms", "local_submit_p50_ms", None,
     "< 15 ms added", lambda h: (h["celery_submit_overhead_ms"] if h["celery_submit_overhead_ms"] is not None
                                 else 1e9) < 15),
    ("celery verdicts/s: 1 worker / 2 workers", "celery_verdicts_per_s_1w", "celery_verdicts_per_s_2w", None, "",
     None),
    ("output flood: job's end -> verdict event, p50 (ms)", "flood_verdict_lag_ms", None, None, "< 2000 ms",
     lambda h: (h["flood_verdict_lag_ms"] if h["flood_verdict_lag_ms"] is not None else 1e9) < 2000),
    ("output flood: SSE events vs output lines", "flood_events", "flood_output_lines", None, "", None),
    ("page p99 with 4 hostile jobs (ms) vs no job", "hostile_page_p99_ms", "quiet_page_p99_ms", "hostile_p99_ratio",
     "< 100 ms",
     lambda h: (h["hostile_page_p99_ms"] or 1e9) < 100),
]


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{value:,.1f}" if isinstance(value, float) else str(value)


def markdown(head: dict, machine: str = "") -> str:
    """Render the headline figures as a Markdown table: figure, baseline (or second figure), ratio, target."""
    lines = ["| figure | ours | baseline / second figure | ratio | target | met |", "|---|---|---|---|---|---|"]
    for label, key, base, ratio, target, check in ROWS:
        met = "" if check is None or head.get(key) is None else ("yes" if check(head) else "**no**")
        lines.append(f"| {label} | {_fmt(head.get(key))} | {_fmt(head.get(base)) if base else ''} | "
                     f"{_fmt(head.get(ratio)) if ratio else ''} | {target} | {met} |")
    if machine:
        lines.append(f"\n{machine}")
    return "\n".join(lines)


def targets_met(head: dict) -> dict[str, bool]:
    """Return, per targeted figure, whether it met its target (figures that did not run are left out)."""
    return {key: bool(check(head)) for _label, key, _b, _r, _t, check in ROWS
            if check is not None and head.get(key) is not None}
