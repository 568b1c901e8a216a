"""Decide fits-on-one-gpu's checks from the harness report and the probe's figures (runs outside the sandbox)."""

import re

from app.grading.facts import Facts, at, check, check_runs

PARAMS = 24 * (4096 * 4096 + 4096)  # the starter's model: 24 blocks of Linear(4096, 4096)
SAMPLES, TOKENS = 64, 1024  # what each optimizer step of the starter learns from
GiB = 1 << 30


def evaluate(facts: Facts):
    """Return the checks of fits-on-one-gpu, in the order of exercise.yaml."""
    return [check_runs(facts), _same_model(facts), _same_effective_batch(facts), _fits(facts)]


def _gib(n) -> str:
    return f"{n / GiB:.2f} GiB"


def _same_model(facts: Facts):
    params = facts.probe.get("params")
    if params is None:
        return check("same_model", False, "the grader found no model in your file; keep `model = nn.Sequential(...)` "
                                          "at the top level.")
    if params < PARAMS:
        return check("same_model", False, f"your model has {params:,} parameters, the exercise's {PARAMS:,}: a "
                                          "smaller model fits, but it is not the one to train; keep WIDTH and DEPTH "
                                          "and save memory on the activations instead.")
    return check("same_model", True)


def _samples_per_step(facts: Facts) -> dict[int, int]:
    """Sequences x tokens the model saw before each optimizer step (forward calls the learner's code made)."""
    seen: dict[int, int] = {}
    for f in facts.events("forward"):
        shape = f.get("shape") or []
        if len(shape) >= 2:
            seen[f.get("step", 0)] = seen.get(f.get("step", 0), 0) + shape[0] * shape[1]
    return seen


def _same_effective_batch(facts: Facts):
    seen = _samples_per_step(facts)
    done = {step: n for step, n in seen.items() if step < facts.steps}
    if not done:
        return check("same_effective_batch", False, "no optimizer step finished, so the grader could not count what "
                                                    "one learns from; make the program reach `opt.step()`.")
    want = SAMPLES * TOKENS
    wrong = {step: n for step, n in done.items() if n != want}
    if wrong:
        step, n = next(iter(wrong.items()))
        return check("same_effective_batch", False,
                     f"optimizer step {step + 1} learned from {n:,} tokens ({n / TOKENS:g} sequences of {TOKENS}); "
                     f"the starter's learns from {want:,} ({SAMPLES} x {TOKENS}): keep it, and if a batch that large "
                     "does not fit, run it as several micro-batches whose gradients add up before one `opt.step()`.")
    return check("same_effective_batch", True)


def _fits(facts: Facts):
    peak, total = facts.probe.get("peak"), facts.probe.get("total")
    exc = facts.outcome.get("exception") or {}
    if "OutOfMemoryError" in (exc.get("type") or ""):
        asked = re.search(r"Tried to allocate (\d+\.\d+ \w+)", exc.get("message") or "")
        what = f"asking for {asked.group(1)} more" if asked else "this allocation"
        peak_note = f"; the peak before it was {_gib(peak)}" if peak else ""
        return check("fits", False, f"{at(exc.get('line'))}torch.OutOfMemoryError: {what} did not fit on the "
                                    f"{_gib(total or 0)} card{peak_note}. Activations (what each layer saves for "
                                    "backward) grow with the batch: micro-batches with gradient accumulation, "
                                    "activation checkpointing or bf16 autocast shrink them.", exc.get("line"))
    if not facts.steps:
        return check("fits", False, "no optimizer step finished on the card.")
    if peak and total and peak <= total:
        return check("fits", True, f"peak {_gib(peak)} of the card's {_gib(total)}.")
    return check("fits", False, "the grader could not read the card's peak memory.")
