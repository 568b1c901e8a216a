"""`make bench` can find every benchmark, and its summary carries the headline keys issue 7 names.

The benchmarks themselves run in `make bench`, not here: a test never asserts a wall-clock time.
"""

from __future__ import annotations

import contextlib

from bench.__main__ import discover
from bench.summary import RATIO_TARGETS, headline, markdown, ratios_met, targets_met

REQUIRED = ["sandbox_warm_p50_ms", "sandbox_cold_p50_ms", "sandbox_speedup", "idle_child_uss_mb",
            "grade_training_loop_p50_ms", "grade_training_loop_p95_ms", "page_rps", "plain_rps",
            "page_throughput_ratio", "verdicts_per_s", "submission_p95_ms", "lost_submissions", "sim_fidelity",
            "celery_submit_p50_ms", "local_submit_p50_ms", "celery_verdicts_per_s_1w", "celery_verdicts_per_s_2w",
            "ddp_submit_p50_ms", "ddp_cold_torchrun_p50_ms", "ddp_submit_speedup", "flood_verdict_lag_ms"]


def test_every_benchmark_module_is_discovered():
    assert set(discover()) >= {"sandbox", "grading", "live", "pages", "load", "hostile", "fidelity", "workers", "ddp",
                               "flood", "clock"}


def test_the_clocks_figures_have_stable_headline_keys():
    head = headline({"clock": {"clock_sim_wall_ms": 900.0, "clock_host_wall_ms": 30000.0, "time_model_error": 0.21}})
    assert head["clock_sim_wall_ms"] == 900.0 and head["clock_host_wall_ms"] == 30000.0
    assert head["clock_sim_over_host"] == 0.03 and head["time_model_error"] == 0.21
    table = markdown(head)
    assert "| 900.0 | 30,000.0 | 0.0 |" in table and "| 0.2 |" in table


def test_the_interception_floor_is_a_ratio_of_the_same_runs_two_in_process_figures():
    head = headline({"grading": {"inprocess_plain_p50_ms": 8.0, "inprocess_hand_on_mode_p50_ms": 12.0,
                                 "plain_job_p50_ms": 20.0, "grade_training_loop_p50_ms": 50.0}})
    assert head["hand_on_mode_over_plain"] == 1.5 and head["grade_over_plain"] == 2.5
    assert "| 12.0 | 8.0 | 1.5 |" in markdown(head)
    assert headline({"grading": {"plain_job_p50_ms": 20.0}})["hand_on_mode_over_plain"] is None  # not measured


def test_the_floor_in_c_and_in_a_job_are_ratios_of_the_same_runs_figures():
    head = headline({"grading": {"inprocess_plain_p50_ms": 8.0, "inprocess_hand_on_mode_p50_ms": 12.0,
                                 "inprocess_c_hand_on_mode_p50_ms": 11.0, "plain_job_p50_ms": 20.0,
                                 "hand_on_job_p50_ms": 29.0}})
    assert head["c_hand_on_mode_over_plain"] == 1.375 and head["hand_on_job_over_plain"] == 1.45
    table = markdown(head)
    assert "| 11.0 | 8.0 | 1.4 |" in table and "| 29.0 | 20.0 | 1.4 |" in table
    no_compiler = headline({"grading": {"inprocess_plain_p50_ms": 8.0, "inprocess_c_hand_on_mode_p50_ms": None}})
    assert no_compiler["c_hand_on_mode_over_plain"] is None


def test_the_hand_on_job_runs_the_program_as_it_is_under_a_mode_that_sees_every_call():
    import contextlib
    import io

    import torch.overrides

    from bench.grading import hand_on_job

    code = 'import torch\nx = torch.ones(2) * 3\nprint(f"{x.sum().item():.1f} {{braces}} \'single\' \\"double\\"")\n'
    outputs, seen = [], []
    original = torch.overrides.TorchFunctionMode.__init__

    def counting(self, *args, **kwargs):  # the job's mode, once it is made
        seen.append(type(self).__name__)
        original(self, *args, **kwargs)
    for source in (code, hand_on_job(code)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), _patched(torch.overrides.TorchFunctionMode, "__init__", counting):
            exec(compile(source, "main.py", "exec"), {"__name__": "__main__"})
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] == "6.0 {braces} 'single' \"double\"\n"
    assert seen == ["_HandOn"]  # only the wrapped program made a mode


def test_the_hand_on_mode_in_c_hands_each_call_on(tmp_path):
    import shutil
    import sysconfig
    import types

    import pytest
    import torch
    from torch.overrides import TorchFunctionMode

    from bench.grading import c_hand_on

    if shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        pytest.skip("no C compiler: the bench reports this figure as not measured")
    in_c = c_hand_on(tmp_path)
    assert in_c is not None
    mode = TorchFunctionMode()
    mode.__torch_function__ = types.MethodType(in_c, mode)
    with mode:
        x = torch.arange(4.0)
        y = torch.add(x, 1, alpha=2)  # keywords handed on
        z = x.sum()  # a method, no keywords
    assert y.tolist() == [2.0, 3.0, 4.0, 5.0] and z.item() == 6.0


def test_a_forked_measurement_brings_its_figure_back_or_says_it_has_none():
    import pytest

    from bench.grading import _in_child

    assert _in_child(lambda: 2.5) == 2.5
    with pytest.raises(RuntimeError, match="ended without a figure"):
        _in_child(lambda: 1 / 0)


@contextlib.contextmanager
def _patched(owner, name, value):
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def test_summary_has_every_headline_key_with_ratios_and_targets():
    figures = {"sandbox": {"warm": {"p50_ms": 20.0, "p95_ms": 25.0}, "cold": {"p50_ms": 2000.0, "p95_ms": 2500.0},
                           "memory": {"idle_child_uss_mb": 2.5}},
               "live": {"submission_p50_ms": 120.0, "submission_p95_ms": 160.0, "cold_subprocess_p50_ms": 2400.0},
               "pages": {"page_rps": 800.0, "plain_rps": 1000.0},
               "load": {"verdicts_per_s": 9.5, "submission_p95_ms": 900.0, "lost_submissions": 0},
               "fidelity": {"sim_fidelity": 0.98, "programs": 49},
               "workers": {"celery_submit_p50_ms": 30.0, "local_submit_p50_ms": 20.0, "celery_submit_overhead_ms": 10.0,
                           "celery_verdicts_per_s_1w": 5.0, "celery_verdicts_per_s_2w": 8.0},
               "ddp": {"ddp_submit_p50_ms": 400.0, "ddp_submit_p95_ms": 500.0, "ddp_cold_torchrun_p50_ms": 5000.0,
                       "ddp_cold_torchrun_cpu_p50_ms": 4800.0},
               "flood": {"flood_verdict_lag_ms": 40.0, "flood_events_p50": 7, "flood_output_lines_p50": 96000}}
    head = headline(figures)
    assert all(isinstance(head[key], (int, float)) for key in REQUIRED), {k: head[k] for k in REQUIRED}
    assert head["sandbox_speedup"] == 100.0 and head["page_throughput_ratio"] == 0.8
    met = targets_met(head)
    assert not met["sandbox_warm_p50_ms"] and not met["page_rps"]  # 100x and 0.8: under issue 31's 300x and 0.95
    assert met["lost_submissions"] and met["sim_fidelity"]
    assert met["celery_submit_p50_ms"] and met["ddp_submit_p50_ms"] and head["ddp_submit_speedup"] == 12.5
    assert met["flood_verdict_lag_ms"]
    slow = targets_met(headline({"ddp": {"ddp_submit_p50_ms": 900.0, "ddp_cold_torchrun_p50_ms": 3000.0}}))
    assert slow == {"ddp_submit_p50_ms": False}  # under 1 s, but only 3.3x faster than cold
    assert "hostile_page_p99_ms" not in met  # a benchmark that did not run is not reported as met
    table = markdown(head)
    assert ("| lesson page requests/s @64 vs plain framework response | 800.0 | 1,000.0 | 0.8 | "
            "page_throughput_ratio >= 0.95 | **no** |") in table


# issue 31's stable keys, each a ratio of two figures of the same run
RATIO_KEYS = ["grade_over_plain", "http_over_plain", "load_capacity_share", "page_throughput_ratio",
              "hostile_p99_ratio", "sandbox_speedup", "first_job_over_later"]


def test_issue_31_ratios_under_their_stable_keys_with_their_targets():
    assert list(RATIO_TARGETS) == RATIO_KEYS
    figures = {"grading": {"grade_training_loop_p50_ms": 50.0, "plain_job_p50_ms": 44.0},
               "live": {"submission_p50_ms": 60.0},
               "load": {"verdicts_per_s": 12.0, "raw_jobs_per_s": 20.0},
               "pages": {"page_rps": 960.0, "plain_rps": 1000.0},
               "hostile": {"hostile_page_p99_ms": 45.0, "quiet_page_p99_ms": 40.0},
               "sandbox": {"warm": {"p50_ms": 6.0}, "cold": {"p50_ms": 2400.0}},
               "first_job": {"first_job_ms": 80.0, "later_jobs_p50_ms": 82.0}}
    head = headline(figures)
    assert {key: head[key] for key in RATIO_KEYS} == {
        "grade_over_plain": 1.136, "http_over_plain": 1.364, "load_capacity_share": 0.6, "page_throughput_ratio": 0.96,
        "hostile_p99_ratio": 1.125, "sandbox_speedup": 400.0, "first_job_over_later": 0.976}
    assert ratios_met(head) == dict.fromkeys(RATIO_KEYS, True)
    table = markdown(head)
    assert "| 50.0 | 44.0 | 1.1 | grade_over_plain <= 1.25 | yes |" in table
    assert "| 80.0 | 82.0 | 1.0 | first_job_over_later <= 1 | yes |" in table

    # the issue's figures of the day: every one misses its target, and each says so
    today = {"grading": {"grade_training_loop_p50_ms": 137.7, "plain_job_p50_ms": 44.7},
             "live": {"submission_p50_ms": 131.8}, "load": {"verdicts_per_s": 6.8, "raw_jobs_per_s": 23.5},
             "pages": {"page_rps": 700.0, "plain_rps": 1000.0},
             "hostile": {"hostile_page_p99_ms": 85.0, "quiet_page_p99_ms": 42.0},
             "sandbox": {"warm": {"p50_ms": 10.0}, "cold": {"p50_ms": 1920.0}},
             "first_job": {"first_job_ms": 4750.0, "later_jobs_p50_ms": 80.0}}
    assert ratios_met(headline(today)) == dict.fromkeys(RATIO_KEYS, False)
    # a benchmark that did not run leaves its ratio None and out of ratios_met
    assert headline({})["first_job_over_later"] is None and ratios_met(headline({})) == {}
