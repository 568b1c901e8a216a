"""Decide model-internals' checks from the harness report and the probe's facts (runs outside the sandbox)."""

import re

from app.grading.facts import Facts, at, check, check_runs, check_same_device, first_line, name_of


def evaluate(facts: Facts):
    """Return the checks of model-internals, in the order of exercise.yaml."""
    return [check_runs(facts), _same_device(facts), _buffer_registered(facts), _created_on_input_device(facts)]


def _models(facts: Facts) -> list[dict]:
    return facts.probe.get("models") or []


def _line_text(facts: Facts, line) -> str:
    return (facts.probe.get("lines") or {}).get(str(line), "")


def _no_model(facts: Facts, check_id: str):
    stopped = facts.outcome.get("exception")
    where = f" (the program stopped at line {stopped['line']})" if stopped and stopped.get("line") else ""
    return check(check_id, False, f"the grader found no model of yours to look inside{where}; keep the "
                                  "`nn.Module` subclass in your file and build it, e.g. `model = SequenceScorer()`.")


# ------------------------------------------------------------------ same_device, with the model's own reasons
def _same_device(facts: Facts):
    """The shared check, with the model's own reason when the mismatch is inside the learner's model."""
    result = check_same_device(facts)
    if result.passed:
        return result
    m = facts.events("mismatch")[0]
    accel = [t for t in m.get("tensors") or [] if facts.on_accelerator(t.get("device"))]
    accel_name = name_of(accel[0], "a tensor on the device") if accel else "a tensor on the device"
    attr = _plain_attribute_in(facts, m.get("line"))
    if attr:
        what = f"`self.{attr['attr']}` (on {attr['device']}) and {accel_name} (on {facts.accelerator}) met"
        fix = (f"`self.{attr['attr']}` is a plain tensor attribute of `{attr['class']}`, so `model.to(device)` "
               f"left it behind; register it as a buffer: `self.register_buffer(\"{attr['attr']}\", ...)`.")
    else:
        made = _made_on_host_in(facts, m)
        if not made:
            return result
        what = f"{made['name']} (on cpu) and {accel_name} (on {facts.accelerator}) met"
        fix = (f"{made['name']} was made at line {made['line']} by `torch.{made['op']}` on the host; make it on "
               f"the input's device: `device={made['input']}.device`.")
    message = first_line(m.get("message", ""))
    dot = "" if message.endswith(("!", ".")) else "."
    return check("same_device", False, f"{at(m.get('line'))}{what} in one operation; a GPU raises RuntimeError: "
                                       f"{message}{dot} {fix}", m.get("line"))


def _plain_attribute_in(facts: Facts, line) -> dict | None:
    """The plain tensor attribute on the host that the line uses, if any."""
    text = _line_text(facts, line)
    for model in _models(facts):
        for attr in model["plain"]:
            if re.search(rf"\bself\.{re.escape(attr['attr'])}\b", text) and not facts.on_accelerator(attr["device"]):
                return {**attr, "class": model["class"]}
    return None


def _made_on_host_in(facts: Facts, mismatch: dict) -> dict | None:
    """The host tensor of the mismatch, when the trial saw `forward` make it (`positions = torch.arange(...)`)."""
    host = [t for t in mismatch.get("tensors") or [] if not facts.on_accelerator(t.get("device")) and t.get("dim")]
    names = (host[0].get("names") or []) if host else []
    if not names:
        return None
    assigns = re.compile(rf"\s*{re.escape(names[0])}\s*(?::[^=]*)?=(?!=)")
    for trial in facts.probe.get("trials") or []:
        for made in trial["made"]:
            if made["device"].startswith("cpu") and assigns.match(_line_text(facts, made["line"])):
                return {**made, "name": f"`{names[0]}`", "input": trial["input"]}
    return None


# ------------------------------------------------------------------ buffer_registered
def _buffer_registered(facts: Facts):
    models = _models(facts)
    if not models:
        return _no_model(facts, "buffer_registered")
    for model in models:
        if model["plain"]:
            return _plain_attributes_message(facts, model)
    for model in models:
        for param in model["frozen_parameters"]:
            return check("buffer_registered", False,
                         f"{at(param['line'])}`self.{param['attr']}` is an `nn.Parameter` that never trains "
                         f"(`requires_grad=False`); a tensor the model keeps but does not learn is a buffer: "
                         f"`self.register_buffer(\"{param['attr']}\", ...)`.", param["line"])
    if not any(model["buffers"] for model in models):
        names = ", ".join(f"`{m['class']}`" for m in models)
        return check("buffer_registered", False,
                     f"{names} keeps no buffer, so the input statistics are not part of the model and "
                     "`state_dict()` does not save them. Keep `mean` and `std` in `__init__` with "
                     "`self.register_buffer(\"mean\", ...)` and `self.register_buffer(\"std\", ...)`.")
    return check("buffer_registered", True)


def _plain_attributes_message(facts: Facts, model: dict):
    plain = model["plain"]
    first = plain[0]
    names = " and ".join(f"`self.{a['attr']}`" for a in plain[:3])
    one = len(plain) == 1
    kind = ("holds tensors in a plain list or dict" if first.get("container") and one
            else "is a tensor kept on the class itself" if first.get("owner") == "class" and one
            else "is a plain tensor attribute" if one else "are plain tensor attributes")
    it, they = ("it", "it") if one else ("them", "they")
    moved = (f" {'It is' if one else 'They are'} on {first['device']} only because your code put {it} there; "
             f"`model.to()` would not move {it}, and `state_dict()` does not save {it}."
             if facts.on_accelerator(first["device"]) else
             f" `model.to(device)` moves parameters, buffers and submodules, so {they} stayed on {first['device']}, "
             f"and `state_dict()` does not save {it} either.")
    how = "; ".join(f"`self.register_buffer(\"{a['attr']}\", ...)`" for a in plain[:3])
    return check("buffer_registered", False,
                 f"{at(first['line'])}{names} of `{model['class']}` {kind}.{moved} Register "
                 f"{it} in `__init__`: {how}.", first["line"])


# ------------------------------------------------------------------ created_on_input_device
def _created_on_input_device(facts: Facts):
    trials = facts.probe.get("trials") or []
    if not trials:
        return _no_model(facts, "created_on_input_device")
    for trial in trials:
        x, where = trial["input"], f"`{trial['class']}.forward`"
        for made in trial["made"]:
            make = f"`torch.{made['op']}(...)` in {where}"
            fix = f"Create it where the input is: `torch.{made['op']}(..., device={x}.device)`."
            if any(c["line"] == made["line"] for c in trial["copied"]):
                why = (f"{make} makes its tensor on the host and then copies it to `{x}`'s device, on every "
                       f"call. {fix}")
            elif made["device"].startswith("cpu"):
                why = (f"{make} makes its tensor on the host (cpu), whatever device `{x}` is on; with the model "
                       f"on a GPU, the first operation that meets `{x}` fails. {fix}")
            else:
                why = (f"{make} makes its tensor on `{made['device']}`, a fixed device, not on the device of "
                       f"`{x}`; the model then breaks as soon as it runs anywhere else (the CPU, another GPU). "
                       f"{fix}")
            return check("created_on_input_device", False, f"{at(made['line'])}{why}", made["line"])
        for copied in trial["copied"]:
            return check("created_on_input_device", False,
                         f"{at(copied['line'])}`.{copied['op']}()` in {where} copies a tensor made on "
                         f"{copied['src']} to `{x}`'s device on every call; create it there in the first place: "
                         f"`device={x}.device`.", copied["line"])
    return check("created_on_input_device", True)
