"""Decide runs-on-a-mac's checks from the harness report (runs outside the sandbox)."""

from app.grading.facts import Facts, at, check, check_runs, check_runs_on


def evaluate(facts: Facts):
    """Return the checks of runs-on-a-mac, in the order of exercise.yaml."""
    return [check_runs(facts), _uses_gpu(facts), check_runs_on(facts, "runs_on_a_mac", "mac-m3-max"),
            check_runs_on(facts, "runs_on_a_laptop", "cpu")]


def _uses_gpu(facts: Facts):
    placed = facts.first_placement
    if not placed:
        return check("uses_gpu", False, "nothing ever went to the GPU, although this machine has one: pick the device "
                                        "by asking, `torch.accelerator.current_accelerator() if "
                                        "torch.accelerator.is_available() else torch.device(\"cpu\")`, and put the "
                                        "tensors there.")
    if not placed.get("asked"):
        line = placed.get("line")
        return check("uses_gpu", False, f"{at(line)}a tensor went to {placed.get('device')} before the program asked "
                                        "torch which device is usable: ask first, and use the answer everywhere.",
                     line)
    return check("uses_gpu", True)
