"""Decide fast-loop's checks from the report: the timeline of the simulated H100's modeled clock (runs outside
the sandbox)."""

from app.grading.facts import Facts, check, check_runs

# ms; one training step's modeled time on the simulated H100 (the starter's is about 0.6 ms, the solution's 0.1)
STEP_TARGET_MS = 0.25
STEPS = 60
BATCH = 256
SHAPES = [[512, 256], [512], [1, 512], [1]]  # the starter's model, parameter by parameter
# the loss "went down" when the mean of the last quarter of losses is below this share of the first quarter's
LOSS_DROP = 0.95


def evaluate(facts: Facts):
    """Return the checks of fast-loop, in the order of exercise.yaml."""
    return [check_runs(facts), _trains(facts), _fast_step(facts)]


def _trains(facts: Facts):
    models = (facts.probe or {}).get("models") or {}
    if not any(m.get("shapes") == SHAPES for m in models.values()):
        return check("trains", False, "the starter's model (Linear(256, 512), ReLU, Linear(512, 1)) is gone; keep "
                                      "it: a smaller model would be faster without teaching anything.")
    if not any(facts.on_accelerator(d) for m in models.values() for d in m.get("devices", [])):
        return check("trains", False, "the model is not on the GPU; keep `model = ...to(device)`.")
    if facts.steps < STEPS:
        return check("trains", False, f"the optimizer stepped {facts.steps} times; train for at least {STEPS} "
                                      "steps (`optimizer.step()` in the loop, after `loss.backward()`).")
    forwards = [e for e in facts.events("forward") if e.get("has_params") and e.get("grad")]
    sizes = {(e.get("shape") or [None])[0] for e in forwards}
    if forwards and sizes != {BATCH}:
        return check("trains", False, f"the model saw batches of {sorted(s for s in sizes if s)} samples; keep "
                                      f"batches of {BATCH} drawn from the whole dataset.")
    losses = [v for v in facts.losses if v == v]
    quarter = max(1, len(losses) // 4)
    if len(losses) < 4 or sum(losses[-quarter:]) / quarter >= LOSS_DROP * sum(losses[:quarter]) / quarter:
        return check("trains", False, "the loss did not go down; keep `loss.backward()` and `optimizer.step()` "
                                      "in every step.")
    return check("trains", True)


def _fast_step(facts: Facts):
    timeline = facts.report.get("timeline") or {}
    step = timeline.get("step_ms")
    if not timeline or step is None:
        return check("fast_step", False, "no training step ran on the simulated GPU, so there is no step time to "
                                         "measure; train the model on `device`.")
    if step <= STEP_TARGET_MS:
        return check("fast_step", True)
    lines = timeline.get("lines") or []
    worst = max(lines, key=lambda e: e.get("ms", 0) + e.get("wait_ms", 0), default=None)
    total = timeline.get("modeled_ms") or 0
    where = ""
    if worst:
        cost = worst.get("ms", 0) + worst.get("wait_ms", 0)
        share = f" ({100 * cost / total:.0f}% of the run's {total:.1f} ms)" if total else ""
        work = f"{worst.get('ms', 0):.1f} ms of GPU work and copies"
        what = (f"{work} and {worst.get('wait_ms', 0):.1f} ms of the host waiting for the GPU"
                if worst.get("wait_ms") else work)
        where = f" Line {worst['line']} costs the most: {cost:.1f} ms of modeled time in all{share}, {what}."
    return check("fast_step", False,
                 f"one training step takes {step:.3f} ms on the simulated H100; the target is {STEP_TARGET_MS} "
                 f"ms.{where} Copy what does not change once, before the loop, and read values back from the GPU "
                 "rarely.", worst["line"] if worst else None)
