"""Hostile programs under load, short version: a fork bomb, a memory bomb, a CPU spin and an output flood run
through the HTTP API while 20 clients read lesson pages.

Every page read must succeed and every hostile job must end in a timeout or failed verdict within its limits
(wall clock plus a generous grace). Page latency is printed, not asserted: its target (p99 < 100 ms) is checked
by `make bench` (bench/hostile.py), which runs the same driver with the default limits.
"""

from __future__ import annotations

import pytest

from bench.hostile import PROGRAMS, figures, hostile_run, within_limits

pytestmark = pytest.mark.slow

# seconds; shorter than the default wall-clock limit so the test stays short
WALL_S = 4.0


def test_hostile_programs_end_within_their_limits_while_pages_are_served(tmp_path):
    result = hostile_run(tmp_path, rounds=1, wall_s=WALL_S)
    (round_,) = result["rounds"]
    fig = figures(result, WALL_S)
    jobs = [(job["program"], job["status"], job["seconds"]) for job in round_["jobs"]]
    print(f"\nhostile under load: page p50 {fig['hostile_page_p50_ms']} ms, p99 {fig['hostile_page_p99_ms']} ms "
          f"over {fig['hostile_page_reads']} reads; jobs (program, verdict, seconds): {jobs}")
    assert round_["reads"].latencies_ms, "the readers read nothing"
    assert set(round_["reads"].statuses) == {200}, round_["reads"].statuses
    assert {job["program"] for job in round_["jobs"]} == set(PROGRAMS)
    for job in round_["jobs"]:
        assert within_limits(job, WALL_S), job
