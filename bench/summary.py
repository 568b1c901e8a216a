"""Turn every benchmark's figures into the side-by-side summary: bench/results/summary.json and summary.md.

Each headline figure sits next to the baseline measured in the same run and the target it must meet. The
flat keys of summary.json are a contract (issue 7); the per-module figures stay under their module's name.
Issue 31's targets are same-run ratios under stable keys (RATIO_TARGETS): grade_over_plain, http_over_plain,
load_capacity_share, page_throughput_ratio, hostile_p99_ratio, sandbox_speedup, first_job_over_later.
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
        "load_page_p50_ms": g("load.page_p50_under_load_ms"),
        "load_page_p99_ms": g("load.page_p99_under_load_ms"),
        "hostile_page_p99_ms": g("hostile.hostile_page_p99_ms"),
        "quiet_page_p99_ms": g("hostile.quiet_page_p99_ms"),
        "plain_job_training_loop_p50_ms": g("grading.plain_job_p50_ms"),
        "simulated_run_job_training_loop_p50_ms": g("grading.simulated_run_job_p50_ms"),
        "grading_overhead_p50_ms": g("grading.grading_overhead_p50_ms"),
        "inprocess_plain_p50_ms": g("grading.inprocess_plain_p50_ms"),
        "inprocess_hand_on_mode_p50_ms": g("grading.inprocess_hand_on_mode_p50_ms"),
        "inprocess_c_hand_on_mode_p50_ms": g("grading.inprocess_c_hand_on_mode_p50_ms"),
        "hand_on_job_training_loop_p50_ms": g("grading.hand_on_job_p50_ms"),
        "forked_plain_p50_ms": g("grading.forked_plain_p50_ms"),
        "forked_hand_on_mode_p50_ms": g("grading.forked_hand_on_mode_p50_ms"),
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
        "two_machines_submit_p50_ms": g("two_machines.two_machines_submit_p50_ms"),
        "two_machines_cold_torchrun_p50_ms": g("two_machines.two_machines_cold_torchrun_p50_ms"),
        "flood_verdict_lag_ms": g("flood.flood_verdict_lag_ms"),
        "flood_events": g("flood.flood_events_p50"),
        "flood_output_lines": g("flood.flood_output_lines_p50"),
        "raw_jobs_per_s": g("load.raw_jobs_per_s"),
        "first_job_ms": g("first_job.first_job_ms"),
        "lesson_block_run_p50_ms": g("lesson_blocks.block_run_p50_ms"),
        "lesson_block_exercise_run_p50_ms": g("lesson_blocks.exercise_run_p50_ms"),
        "later_jobs_p50_ms": g("first_job.later_jobs_p50_ms"),
        # issue 26's simulated clock: its timing programs' wall time, simulated and on the plain CPU, and the
        # modeled times' median relative error against a real GPU's recordings
        "clock_sim_wall_ms": g("clock.clock_sim_wall_ms"),
        "clock_host_wall_ms": g("clock.clock_host_wall_ms"),
        "time_model_error": g("clock.time_model_error"),
    }
    for slug in ("same_device", "pick_device", "bring_it_back"):
        out[f"grade_{slug}_p50_ms"] = g(f"live.submission_{slug}_p50_ms")
        out[f"grade_{slug}_p95_ms"] = g(f"live.submission_{slug}_p95_ms")
    out["sandbox_speedup"] = _ratio(out["sandbox_cold_p50_ms"], out["sandbox_warm_p50_ms"])
    out["grade_training_loop_speedup"] = _ratio(out["grade_cold_subprocess_p50_ms"], out["grade_training_loop_p50_ms"])
    out["ddp_submit_speedup"] = _ratio(out["ddp_cold_torchrun_p50_ms"], out["ddp_submit_p50_ms"])
    out["two_machines_submit_speedup"] = _ratio(out["two_machines_cold_torchrun_p50_ms"],
                                                out["two_machines_submit_p50_ms"])
    out["page_throughput_ratio"] = _ratio(out["page_rps"], out["plain_rps"])
    out["hostile_p99_ratio"] = _ratio(out["hostile_page_p99_ms"], out["quiet_page_p99_ms"])
    out["grade_over_plain"] = _ratio(out["course_grade_training_loop_p50_ms"], out["plain_job_training_loop_p50_ms"])
    # grade_over_plain's two factors: the simulated GPU's cost on the same run job, and grading's over that run
    out["simulated_run_over_plain"] = _ratio(out["simulated_run_job_training_loop_p50_ms"],
                                             out["plain_job_training_loop_p50_ms"])
    out["grade_over_simulated_run"] = _ratio(out["course_grade_training_loop_p50_ms"],
                                             out["simulated_run_job_training_loop_p50_ms"])
    # the floor of any tracer built on a TorchFunctionMode: one that only hands each call on, over the bare program
    out["hand_on_mode_over_plain"] = _ratio(out["inprocess_hand_on_mode_p50_ms"], out["inprocess_plain_p50_ms"])
    # ... the same mode written in C, and, in grade_over_plain's own units, the plain run job under that mode
    out["c_hand_on_mode_over_plain"] = _ratio(out["inprocess_c_hand_on_mode_p50_ms"], out["inprocess_plain_p50_ms"])
    out["hand_on_job_over_plain"] = _ratio(out["hand_on_job_training_loop_p50_ms"],
                                           out["plain_job_training_loop_p50_ms"])
    out["forked_hand_on_over_plain"] = _ratio(out["forked_hand_on_mode_p50_ms"], out["forked_plain_p50_ms"])
    out["http_over_plain"] = _ratio(out["grade_training_loop_p50_ms"], out["plain_job_training_loop_p50_ms"])
    out["load_capacity_share"] = _ratio(out["verdicts_per_s"], out["raw_jobs_per_s"])
    out["first_job_over_later"] = _ratio(out["first_job_ms"], out["later_jobs_p50_ms"])
    out["lesson_block_over_exercise"] = _ratio(out["lesson_block_run_p50_ms"], out["lesson_block_exercise_run_p50_ms"])
    out["clock_sim_over_host"] = _ratio(out["clock_sim_wall_ms"], out["clock_host_wall_ms"])
    return out


# Issue 31's targets: each a ratio of two figures measured in the same run, under a stable key of summary.json
# (key -> (the comparison, the bound)).
RATIO_TARGETS: dict[str, tuple[str, float]] = {
    "grade_over_plain": ("<=", 1.25),  # `course grade` training-loop over its plain run job, warm p50
    "http_over_plain": ("<=", 1.5),  # HTTP submit -> verdict, training-loop, over the plain run job
    "load_capacity_share": (">=", 0.5),  # verdicts/s, 32 submitters, over the same jobs graded without the web
    "page_throughput_ratio": (">=", 0.95),  # lesson page requests/s over a plain framework response
    "hostile_p99_ratio": ("<=", 1.2),  # page p99 with 4 hostile jobs over none
    "sandbox_speedup": (">=", 300.0),  # cold subprocess over warm sandbox job, p50
    "first_job_over_later": ("<=", 1.0),  # first job after ready, submit to first output, over later jobs' p50
}


def _meets(key: str):
    op, bound = RATIO_TARGETS[key]

    def check(h: dict) -> bool:
        value = h.get(key)
        return value is not None and (value <= bound if op == "<=" else value >= bound)

    return check


def _target(key: str, what: str = "") -> str:
    op, bound = RATIO_TARGETS[key]
    return f"{key} {op} {bound:g}{what}"


# (label, figure key, baseline key, ratio key, target text, check)
ROWS = [
    ("sandbox job, warm p50 (ms) vs cold subprocess", "sandbox_warm_p50_ms", "sandbox_cold_p50_ms", "sandbox_speedup",
     _target("sandbox_speedup", "x faster than cold"), _meets("sandbox_speedup")),
    ("sandbox job, warm p95 (ms)", "sandbox_warm_p95_ms", "sandbox_cold_p95_ms", None, "", None),
    ("sandbox jobs/s, 2 concurrent", "sandbox_jobs_per_s_c2", None, None, "", None),
    ("sandbox jobs/s, 8 concurrent", "sandbox_jobs_per_s_c8", None, None, "", None),
    ("idle warm child USS (MB)", "idle_child_uss_mb", None, None, "< 30 MB",
     lambda h: (h["idle_child_uss_mb"] or 99) < 30),
    ("`course grade` training-loop, warm p50 (ms) vs plain run job", "course_grade_training_loop_p50_ms",
     "plain_job_training_loop_p50_ms", "grade_over_plain", _target("grade_over_plain"), _meets("grade_over_plain")),
    ("... of which: training-loop's run job on the simulated GPU, warm p50 (ms) vs plain run job",
     "simulated_run_job_training_loop_p50_ms", "plain_job_training_loop_p50_ms", "simulated_run_over_plain", "",
     None),
    ("... and: `course grade` training-loop, warm p50 (ms) vs its run job on the simulated GPU",
     "course_grade_training_loop_p50_ms", "simulated_run_job_training_loop_p50_ms", "grade_over_simulated_run", "",
     None),
    ("... and in the bench's own process, warm, no sandbox: training-loop under a TorchFunctionMode that only hands "
     "each call on (ms) vs the bare program", "inprocess_hand_on_mode_p50_ms", "inprocess_plain_p50_ms",
     "hand_on_mode_over_plain", "", None),
    ("... and the same, the mode's `__torch_function__` written in C (ms) vs the bare program",
     "inprocess_c_hand_on_mode_p50_ms", "inprocess_plain_p50_ms", "c_hand_on_mode_over_plain", "", None),
    ("... and the floor in grade_over_plain's units: the plain run job under a mode that only hands each call on "
     "(ms) vs plain run job", "hand_on_job_training_loop_p50_ms", "plain_job_training_loop_p50_ms",
     "hand_on_job_over_plain", "", None),
    ("... and the same in children forked from the bench's process once it has run the program bare and under the "
     "mode (ms) vs bare", "forked_hand_on_mode_p50_ms", "forked_plain_p50_ms", "forked_hand_on_over_plain", "", None),
    ("HTTP grade training-loop p50 (ms) vs plain run job", "grade_training_loop_p50_ms",
     "plain_job_training_loop_p50_ms", "http_over_plain", _target("http_over_plain"), _meets("http_over_plain")),
    ("HTTP grade training-loop p50 (ms) vs cold subprocess", "grade_training_loop_p50_ms",
     "grade_cold_subprocess_p50_ms", "grade_training_loop_speedup", "< 150 ms",
     lambda h: (h["grade_training_loop_p50_ms"] or 1e9) < 150),
    ("HTTP grade training-loop p95 (ms)", "grade_training_loop_p95_ms", None, None, "", None),
    ("HTTP grade same-device p50 / p95 (ms)", "grade_same_device_p50_ms", "grade_same_device_p95_ms", None, "", None),
    ("HTTP grade pick-device p50 / p95 (ms)", "grade_pick_device_p50_ms", "grade_pick_device_p95_ms", None, "", None),
    ("HTTP grade bring-it-back p50 / p95 (ms)", "grade_bring_it_back_p50_ms", "grade_bring_it_back_p95_ms", None, "",
     None),
    ("lesson-block Run to last output p50 (ms) vs an exercise run's (same-device) in the same run",
     "lesson_block_run_p50_ms", "lesson_block_exercise_run_p50_ms", "lesson_block_over_exercise", "", None),
    ("first job after ready, submit to first output (ms) vs later jobs p50", "first_job_ms", "later_jobs_p50_ms",
     "first_job_over_later", _target("first_job_over_later"), _meets("first_job_over_later")),
    ("HTTP grade ddp-training (2 ranks) p50 (ms) vs cold torchrun --nproc-per-node=2", "ddp_submit_p50_ms",
     "ddp_cold_torchrun_p50_ms", "ddp_submit_speedup", "< 1 s and >= 5x faster than cold",
     lambda h: (h["ddp_submit_p50_ms"] or 1e9) < 1000 and (h["ddp_submit_speedup"] or 0) >= 5),
    ("HTTP grade ddp-training p95 (ms) vs cold torchrun of the CPU port p50", "ddp_submit_p95_ms",
     "ddp_cold_torchrun_cpu_p50_ms", None, "", None),
    ("HTTP grade two-machines (2 machines x 2 ranks) p50 (ms) vs cold torchrun --nnodes=2 on each",
     "two_machines_submit_p50_ms", "two_machines_cold_torchrun_p50_ms", "two_machines_submit_speedup",
     "< 2 s and >= 10x faster than cold",
     lambda h: (h["two_machines_submit_p50_ms"] or 1e9) < 2000 and (h["two_machines_submit_speedup"] or 0) >= 10),
    ("simulated GPU fidelity (share of the corpus that matches) vs corpus programs", "sim_fidelity",
     "fidelity_programs", None, ">= 0.95", lambda h: (h["sim_fidelity"] or 0) >= 0.95),
    ("lesson page requests/s @64 vs plain framework response", "page_rps", "plain_rps", "page_throughput_ratio",
     _target("page_throughput_ratio"), _meets("page_throughput_ratio")),
    ("lesson page p99 @64 (ms)", "page_p99_ms", "plain_p99_ms", None, "", None),
    ("verdicts/s, 32 submitters vs the same jobs graded without the web", "verdicts_per_s", "raw_jobs_per_s",
     "load_capacity_share", _target("load_capacity_share"), _meets("load_capacity_share")),
    ("submission p95 under load (ms)", "submission_p95_ms", None, None, "<= 1000 ms",
     lambda h: (h["submission_p95_ms"] or 1e9) <= 1000),
    ("lost submissions", "lost_submissions", None, None, "0", lambda h: h["lost_submissions"] == 0),
    ("readers' page p50 / p99 under that load (ms)", "load_page_p50_ms",
     "load_page_p99_ms", None, "", None),
    ("submit until 202, p50 (ms): celery tier vs local runner", "celery_submit_p50_ms", "local_submit_p50_ms", None,
     "< 15 ms added", lambda h: (h["celery_submit_overhead_ms"] if h["celery_submit_overhead_ms"] is not None
                                 else 1e9) < 15),
    ("celery verdicts/s: 1 worker / 2 workers", "celery_verdicts_per_s_1w", "celery_verdicts_per_s_2w", None, "",
     None),
    ("output flood: job's end -> verdict event, p50 (ms)", "flood_verdict_lag_ms", None, None, "< 2000 ms",
     lambda h: (h["flood_verdict_lag_ms"] if h["flood_verdict_lag_ms"] is not None else 1e9) < 2000),
    ("output flood: SSE events vs output lines", "flood_events", "flood_output_lines", None, "", None),
    ("issue 26's timing programs, wall (ms): on the simulated H100 vs the same code on the plain CPU",
     "clock_sim_wall_ms", "clock_host_wall_ms", "clock_sim_over_host", "", None),
    ("modeled times' median relative error vs a real H200's recordings", "time_model_error", None, None, "", None),
    ("page p99 with 4 hostile jobs (ms) vs no job", "hostile_page_p99_ms", "quiet_page_p99_ms", "hostile_p99_ratio",
     _target("hostile_p99_ratio"), _meets("hostile_p99_ratio")),
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


def ratios_met(head: dict) -> dict[str, bool]:
    """Return, per ratio of RATIO_TARGETS that could be computed, whether it met its target."""
    return {key: _meets(key)(head) for key in RATIO_TARGETS if head.get(key) is not None}
