"""Decide same-device's checks from the harness report (runs outside the sandbox)."""

from app.grading.facts import Facts, at, check, check_picks_device, check_runs, check_same_device

# the ways Python spells a matrix product; the one that made `y` must have run on the device
PRODUCTS = {"__matmul__", "__rmatmul__", "matmul", "mm", "mv", "einsum", "tensordot", "inner", "dot"}


def evaluate(facts: Facts):
    """Return the checks of same-device, in the order of exercise.yaml."""
    return [check_runs(facts), check_picks_device(facts), check_same_device(facts), _y_on_device(facts),
            _y_value(facts)]


def _y_on_device(facts: Facts):
    y, device = facts.probe.get("y") or {}, facts.probe.get("device") or {}
    accel = facts.accelerator
    if y.get("kind") != "tensor":
        return check("y_on_device", False, "the program never set a tensor `y`; compute `y = weights @ x` on the "
                                           "device.")
    if facts.on_accelerator(y["device"]):
        return _product_on_device(facts)
    if device.get("kind") == "missing" or not facts.on_accelerator(device.get("value")):
        return check("y_on_device", False,
                     f"`device` is {device.get('value')!s} although this machine has {accel}, so everything stayed "
                     f"on the host. Pick the device by asking: `torch.device(\"cuda\" if torch.cuda.is_available() "
                     f"else \"cpu\")`.{facts.tamper_note()}")
    moved_back = [e for e in facts.events("move") if e.get("dst_device") == "cpu"]
    if moved_back:  # the cause is the line that brought it back
        e = moved_back[-1]
        return check("y_on_device", False,
                     f"{at(e['line'])}`.{e['op']}()` brought a result back to the host, so `y` lives on {y['device']}, "
                     f"not on `device` ({accel}); leave it on the device: `y = weights @ x` with both on `device`.",
                     e["line"])
    return check("y_on_device", False,
                 f"`y` lives on {y['device']}, not on `device` ({accel}). Compute it from tensors on the device: "
                 "`y = weights @ x` with both on `device`.")


def _product_on_device(facts: Facts):
    """`y` is on the device; the product that made it must have run there too, not on the host and moved."""
    products = [op for op in facts.ops if op["op"] in PRODUCTS]
    if not products or any(all(facts.on_accelerator(d) for d in op["devices"]) for op in products):
        return check("y_on_device", True)
    op = products[-1]
    return check("y_on_device", False,
                 f"{at(op['line'])}the product ran on the host (cpu) and only its result was moved to the device, "
                 "so the GPU did none of the work. Leave both operands on the device and multiply there: "
                 "`y = weights @ x`.", op["line"])


def _y_value(facts: Facts):
    if facts.probe.get("y_matches"):
        return check("y_value", True)
    if (facts.probe.get("y") or {}).get("kind") != "tensor":
        return check("y_value", False, "there is no tensor `y` to compare with `weights @ x`.")
    return check("y_value", False, "`y` is not equal to `weights @ x`; compute it from `weights` and `x` "
                                   "instead of making a new tensor.")
