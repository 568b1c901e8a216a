"""The Verdict's `timeline` in words: the label the page puts on modeled times, and the figures as one sentence.

The harness measures (app/harness/machine/clock.py); this module only words what it measured, once, so the page
without JavaScript (templates/exercises/_timeline.html) and the live panel (static/js/exercise-timeline.js) show
the same text.
"""

from __future__ import annotations

from app.grading.verdict import RankTimeline, Timeline


def modeled_for(words: str) -> str:
    """The machine's words as the label continues them ("modeled for one H100"): a count or an article in lower
    case, a profile title's note in brackets left out ("NVIDIA H100 SXM5 80GB (the default)")."""
    words = words.split(" (")[0]
    first, _, rest = words.partition(" ")
    if first in ("One", "Two", "A", "An"):
        first = first.lower()
    return f"{first} {rest}".strip()


def ms(value: float | None) -> str:
    """Milliseconds with the precision they deserve: 0 ms, 0.052 ms, 3.14 ms, 41.2 ms, 1,234 ms (as the page's
    drawing words its axis: static/js/exercise-timeline.js)."""
    value = value or 0.0
    if value == 0:
        return "0 ms"
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    if value >= 0.1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def label(timeline: Timeline) -> str:
    """Which machine the times are modeled for, and which real card's recordings calibrated the model."""
    text = f"Modeled for {timeline.modeled_for or timeline.machine or 'a simulated GPU'}"
    if timeline.calibrated_on:
        text += (f": the machine's datasheet figures, with launch and sync costs recorded on a real "
                 f"{timeline.calibrated_on}, against whose recordings the model is checked")
    return text + ". Not a measurement of this server."


def figures(t: Timeline | RankTimeline) -> str:
    """One run's (or one rank's) figures: its times, then its counts and its training step."""
    parts = [f"the GPU busy {ms(t.gpu_busy_ms)}", f"copies {ms(t.copy_ms)}",
             f"the host waiting for the GPU {ms(t.host_wait_ms)}",
             f"the GPU idle waiting for the host {ms(t.gpu_idle_ms)}"]
    counts = f"{t.syncs} sync{'s' if t.syncs != 1 else ''}, {t.kernels} kernels"
    if t.collectives:
        parts.insert(2, f"collectives {ms(t.comm_ms)}")
        counts += f", {t.collectives} collective{'s' if t.collectives != 1 else ''}"
    step = f"; one training step {ms(t.step_ms)}" if t.step_ms else ""
    return f"{', '.join(parts)}; {counts}{step}"


def summary(timeline: Timeline) -> str:
    """The figures in a sentence, for the line above the drawing; of several ranks, each rank's in its own, the
    last to finish named (the job's modeled time is its end)."""
    shown = (f" The drawing shows its first {len(timeline.events):,} events of {timeline.events_total:,}."
             if timeline.events_total > len(timeline.events) else "")
    if len(timeline.ranks) <= 1:
        return f"Modeled run {ms(timeline.modeled_ms)}: {figures(timeline)}.{shown}"
    ends = {r.modeled_ms for r in timeline.ranks}
    ranks = " ".join(f"Rank {r.rank}{' (the last to finish)' if len(ends) > 1 and r.modeled_ms == max(ends) else ''}"
                     f": {figures(r)}." for r in timeline.ranks)
    return (f"Modeled run {ms(timeline.modeled_ms)} over {len(timeline.ranks)} ranks, each with its rows in the "
            f"drawing. {ranks} The times by line of your code are rank 0's.{shown}")


def describe(timeline: Timeline | None, machine_words: str) -> None:
    """Fill the timeline's words in (a verdict on no simulated GPU has no timeline)."""
    if timeline is None:
        return
    timeline.modeled_for = modeled_for(machine_words)
    timeline.label = label(timeline)
    timeline.summary = summary(timeline)
