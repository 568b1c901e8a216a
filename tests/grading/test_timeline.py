"""The Verdict's `timeline` (issue 26): where a graded run's time went on the simulated H100's modeled clock,
through the real sandbox, and the sync advice with its modeled cost."""

from __future__ import annotations

from app.core.config import ROOT
from app.grading.timeline import summary
from app.grading.verdict import RankTimeline, Timeline

SOLUTION = (ROOT / "exercises/training-loop/solution.py").read_text()
# every step also queues 3 ms of GPU work (a 4096 x 4096 product: kept without values, so quick here) and
# then reads the loss: the host waits for that work at every .item()
EVERY_STEP = SOLUTION.replace("        optimizer.step()\n",
                              "        optimizer.step()\n        heavy = big @ big\n"
                              "        print(f\"loss {loss.item():.4f}\")\n").replace(
    "loss_fn = nn.MSELoss()\n", "loss_fn = nn.MSELoss()\nbig = torch.randn(4096, 4096, device=device)\n")


def test_a_graded_run_says_where_its_modeled_time_went(grade):
    verdict = grade("training-loop", EVERY_STEP)
    assert verdict.status == "passed", [c for c in verdict.checks if not c.passed]
    t = verdict.timeline
    assert t is not None and t.machine == "h100"
    assert t.modeled_ms > 0 and t.gpu_busy_ms > 0 and t.kernels > 0
    assert t.syncs >= 20  # 4 batches x 5 epochs read the loss, and the epoch's print
    # what the page draws: a row for the host (its syncs marked), the GPU's stream and its copy engine
    assert [r.name for r in t.rows] == ["host", "cuda:0 stream default", "cuda:0 copy engine"]
    assert t.rows[0].marks >= 20 and t.events and t.events_total == len(t.events)
    assert {e[3] for e in t.events} >= {"kernel", "copy", "sync_mark"}
    assert t.modeled_for == "NVIDIA H100 SXM5 80GB"  # `course grade`: the exercise's machine, by its title
    assert "recorded on a real NVIDIA H200" in t.label and t.summary.startswith("Modeled run ")
    lines = {e.line: e for e in t.lines}
    code = EVERY_STEP.splitlines()
    item_line = next(i for i, text in enumerate(code, 1) if 'print(f"loss' in text)
    forward_line = next(i for i, text in enumerate(code, 1) if "loss = loss_fn(model(xb), yb)" in text)
    assert lines[forward_line].ms > 0  # the forward pass's kernels
    assert lines[item_line].wait_ms > 20 * 1.0  # the host waiting for the GPU at every .item(): 20 x 2-3 ms
    advice = [a for a in verdict.advice if a.line == item_line]
    assert advice and "On the simulated H100 (modeled time) the host waited" in advice[0].message


def test_a_run_that_leaves_the_gpu_unused_costs_it_nothing(grade):
    verdict = grade("training-loop", SOLUTION.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"'))
    assert verdict.timeline is not None  # the simulated GPU is there, unused: nothing ran on it
    assert verdict.timeline.kernels == 0 and verdict.timeline.gpu_busy_ms == 0


def test_a_ddp_run_reports_every_ranks_timeline_with_its_all_reduces(grade):
    verdict = grade("ddp-training", (ROOT / "exercises/ddp-training/solution.py").read_text())
    assert verdict.status == "passed", [c for c in verdict.checks if not c.passed]
    t = verdict.timeline
    assert t is not None and t.machine == "h100"
    assert [r.rank for r in t.ranks] == [0, 1]
    # DDP's broadcast at the wrap, then one all-reduce per step (2 batches a rank x 5 epochs, one bucket each)
    assert all(r.collectives >= 11 and r.comm_ms > 0 for r in t.ranks), t.ranks
    assert t.collectives == t.ranks[0].collectives and t.comm_ms == t.ranks[0].comm_ms
    assert t.modeled_ms == max(r.modeled_ms for r in t.ranks)
    # the drawing's rows: every rank's host, stream and NCCL rows, each named after its rank
    names = [r.name for r in t.rows]
    for rank in (0, 1):
        assert {f"rank {rank} host", f"rank {rank} cuda:{rank} stream default", f"rank {rank} cuda:{rank} nccl"} \
            <= set(names), names
    buckets = [e for e in t.events if "DDP bucket" in e[4]]
    assert {names[e[0]].split(" ")[1] for e in buckets} == {"0", "1"}
    # the line above the drawing gives each rank's figures, not rank 0's alone
    assert "over 2 ranks, each with its rows in the drawing. Rank 0" in t.summary, t.summary
    for r in t.ranks:
        assert f"Rank {r.rank}" in t.summary and f"{r.syncs} syncs, {r.kernels} kernels" in t.summary, t.summary
        assert r.kernels > 0


def test_the_summary_of_several_ranks_gives_each_ranks_figures_and_names_the_last_to_finish():
    ranks = [RankTimeline(rank=0, modeled_ms=12.0, gpu_busy_ms=4.0, comm_ms=1.5, syncs=3, kernels=40, collectives=6,
                          step_ms=2.0),
             RankTimeline(rank=1, modeled_ms=15.0, gpu_busy_ms=4.0, comm_ms=1.5, host_wait_ms=3.0, syncs=3,
                          kernels=40, collectives=6, step_ms=2.5)]
    text = summary(Timeline(modeled_ms=15.0, gpu_busy_ms=4.0, comm_ms=1.5, syncs=3, kernels=40, collectives=6,
                            ranks=ranks))
    assert text == ("Modeled run 15.0 ms over 2 ranks, each with its rows in the drawing. "
                    "Rank 0: the GPU busy 4.00 ms, copies 0 ms, collectives 1.50 ms, the host waiting for the GPU "
                    "0 ms, the GPU idle waiting for the host 0 ms; 3 syncs, 40 kernels, 6 collectives; one training "
                    "step 2.00 ms. Rank 1 (the last to finish): the GPU busy 4.00 ms, copies 0 ms, collectives "
                    "1.50 ms, the host waiting for the GPU 3.00 ms, the GPU idle waiting for the host 0 ms; 3 syncs, "
                    "40 kernels, 6 collectives; one training step 2.50 ms. The times by line of your code are "
                    "rank 0's.")
    ranks[1].modeled_ms = 12.0  # the ranks met at the end: nobody is named
    assert "last to finish" not in summary(Timeline(modeled_ms=12.0, ranks=ranks))
