"""Decide training-loop's checks from the placement trace (runs outside the sandbox)."""

from app.grading.facts import (
    Facts,
    at,
    check,
    check_picks_device,
    check_runs,
    check_same_device,
    discarded_move,
    dropped_cause,
    dropped_copy_message,
    host_cause,
    name_of,
)
from app.grading.source import batch_names, built_at

# the loss "went down" when the mean of the last quarter of losses is below this share of the first quarter's
LOSS_DROP = 0.95


def evaluate(facts: Facts):
    """Return the checks of training-loop, in the order of exercise.yaml."""
    return [check_runs(facts), check_picks_device(facts), _model_on_device(facts), _model_moved_once(facts),
            _batch_on_device(facts), check_same_device(facts), _loss_item(facts), _trains(facts)]


def _device_note(facts: Facts) -> str:
    device = facts.probe.get("device") or {}
    if device.get("kind") == "missing":
        return (" There is no global `device`; pick one: "
                "`device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")`.")
    if not facts.on_accelerator(device.get("value")):
        return (f" `device` is {device.get('value')} although this machine has {facts.accelerator}; pick it by "
                f"asking `torch.cuda.is_available()`.{facts.tamper_note()}")
    return ""


def _model_label(event: dict) -> str:
    names = event.get("names") or []
    return f"`{names[0]}` ({event['module']})" if names else f"the `{event['module']}` model"


def _model_on_device(facts: Facts):
    first: dict[int, dict] = {}
    for e in facts.events("forward"):
        if e.get("has_params") and e["id"] not in first:
            first[e["id"]] = e
    if not first:
        return check("model_on_device", False, "the model never ran a forward pass." + _device_note(facts))
    for e in first.values():
        host = [d for d in e["param_devices"] if not facts.on_accelerator(d)]
        if host:
            var = (e.get("names") or ["model"])[0]
            built = built_at(facts.code, var)  # the fix goes on the line that builds the model
            if built is None or built == e["line"]:
                where, line = f"{at(e['line'])}{_model_label(e)} ran its first forward pass", e["line"]
            else:
                where, line = (f"{at(built)}{_model_label(e)} is built here and ran its first forward pass (line "
                               f"{e['line']})"), built
            return check("model_on_device", False,
                         f"{where} with its parameters on {host[0]}. Move it once, right after building it: "
                         f"`{var} = {var}.to(device)`." + _device_note(facts), line)
    return check("model_on_device", True)


def _model_moved_once(facts: Facts):
    late = [e for e in facts.events("module_move")
            if e.get("forwards", 0) > 0 and any(facts.on_accelerator(d) for d in e.get("devices", []))]
    if late:
        e, total = late[0], facts.count("module_move")
        var = (e.get("names") or ["model"])[0]
        return check("model_moved_once", False,
                     f"{at(e['line'])}`{var}.{e['op']}(...)` runs inside the training loop ({total} calls in all); "
                     f"a model moves its parameters in place, so move it once before the loop: "
                     f"`{var} = {var}.to(device)` right after building it.", e["line"])
    on_device = [e for e in facts.events("forward")
                 if e.get("has_params") and all(facts.on_accelerator(d) for d in e["param_devices"])]
    if not on_device:
        return check("model_moved_once", False, "the model was never moved to the device; move it once, before "
                                                "the loop: `model = model.to(device)`." + _device_note(facts))
    return check("model_moved_once", True)


def _batch_on_device(facts: Facts):
    if not facts.count("batch"):
        return check("batch_on_device", False, "no batch came out of a DataLoader; loop over the `loader`: "
                                               "`for xb, yb in loader:`.")
    for e in facts.events("host_input"):
        bad = [t for t in e["inputs"] if not facts.on_accelerator(t["device"]) and t.get("dim", 1) > 0]
        if bad:
            if not e.get("has_params"):  # a loss module: nn.MSELoss(), nn.CrossEntropyLoss() ...
                return _targets_message(e["line"], bad[0], e["module"])
            var = name_of(bad[0], "the batch")
            dropped = discarded_move(facts, var.strip("`")) if bad[0].get("names") else None
            if dropped is not None:  # the cause is the line that dropped the copy, not the line that used it
                return check("batch_on_device", False, dropped_copy_message(
                    dropped, var.strip("`"), f"line {e['line']} gave `{e['module']}` the batch on the host"),
                    dropped["line"], cause=dropped_cause(dropped, var.strip("`")))
            where = "the model lives on the device" if e.get("has_params") and all(
                facts.on_accelerator(d) for d in e.get("param_devices", [])) else "it should be on the device"
            move = f" Move the batch: {_move_all(facts, var.strip('`'))}." if bad[0].get("names") \
                else " Move each batch with `.to(device)` inside the loop."
            return check("batch_on_device", False,
                         f"{at(e['line'])}{var} reached `{e['module']}` on the host; {where}.{move}", e["line"],
                         cause=host_cause(var.strip("`"), e["line"]) if bad[0].get("names") else None)
    for e in facts.events("loss_fn"):
        bad = [t for t in e["inputs"] if not facts.on_accelerator(t["device"]) and t.get("dim", 1) > 0]
        if bad:
            return _targets_message(e["line"], bad[0], e["fn"])
    return check("batch_on_device", True)


def _move_all(facts: Facts, var: str) -> str:
    """`xb, yb = xb.to(device), yb.to(device)` when the loop unpacks both and neither was moved; else `xb = ...`."""
    moved = {n for e in facts.events("move") if facts.on_accelerator(e.get("dst_device")) for n in e.get("names") or []}
    names = [n for n in batch_names(facts.code, var) if n == var or n not in moved]
    return f"`{', '.join(names)} = {', '.join(f'{n}.to(device)' for n in names)}`"


def _targets_message(line, tensor, where):
    var = name_of(tensor, "the targets")
    move = f"`{var.strip('`')} = {var.strip('`')}.to(device)`" if tensor.get("names") else "`.to(device)`"
    return check("batch_on_device", False, f"{at(line)}{var} reached `{where}` on the host while the model's "
                                           f"output is on the device; move the targets too: {move}.", line,
                 cause=host_cause(var.strip("`"), line) if tensor.get("names") else None)


def _is_loss(read: dict) -> bool:
    return bool(read.get("loss")) or (read.get("dim") == 0 and bool(read.get("grad_fn")))


def _loss_item(facts: Facts):
    reads = facts.events("tensor_print") + facts.events("host_read")
    for r in reads:
        if r.get("prints_repr") and _is_loss(r):
            var = name_of(r, "the loss")
            return check("loss_item", False,
                         f"{at(r['line'])}{var} was printed as a tensor (its repr, with device and grad_fn), not "
                         f"as a number; print `{var.strip('`') if r.get('names') else 'loss'}.item()` instead.",
                         r["line"])
    if not any(r["op"] in ("item", "__format__", "tolist") and (_is_loss(r) or r.get("dim") == 0) for r in reads):
        return check("loss_item", False, "the loss was never printed as a number; print `loss.item()` once per "
                                          "epoch.")
    return check("loss_item", True)


def _trains(facts: Facts):
    steps = facts.events("step")
    if not facts.count("backward"):
        return check("trains", False, "`loss.backward()` never ran, so there were no gradients to learn from.")
    if not steps:
        return check("trains", False, "`optimizer.step()` never ran; call it after `loss.backward()` in the loop.")
    useful = [s for s in steps if s["grads"] and s["nonzero"]]
    if len(useful) * 2 < len(steps):
        s = next(s for s in steps if not (s["grads"] and s["nonzero"]))
        if not s["grads"] and not s.get("backwards"):
            why = "there were no gradients yet: call `loss.backward()` before `optimizer.step()`"
        else:
            why = ("the gradients were gone: `optimizer.zero_grad()` between `loss.backward()` and "
                   "`optimizer.step()` erases them; call it before `backward()`")
        return check("trains", False, f"{at(s.get('line'))}`optimizer.step()` ran but {why}.", s.get("line"))
    losses = [v for v in facts.losses if v == v]  # NaN never equals itself
    if len(losses) < 2:
        return check("trains", False, "the loss was computed fewer than two times; train for a few steps.")
    quarter = max(1, len(losses) // 4)
    first, last = sum(losses[:quarter]) / quarter, sum(losses[-quarter:]) / quarter
    if not last < first * LOSS_DROP:
        return check("trains", False, f"the loss did not go down (about {first:.4g} at the start, {last:.4g} at "
                                      "the end); check that each step uses this batch's gradients.")
    return check("trains", True)
