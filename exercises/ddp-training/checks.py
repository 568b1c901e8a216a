"""Decide ddp-training's checks from each rank's facts (runs outside the sandbox).

Every check reads what each rank did (app/grading/ranks.py), never a global name: a trainer class, functions,
`if __name__ == "__main__":`, the rank from the environment or from `dist.get_rank()` all grade the same.
"""

from app.grading.facts import at, check
from app.grading.ranks import check_ranks_run, ranks_of

WRAPPER = "DistributedDataParallel"
LOCAL_RANK = "`local_rank = int(os.environ[\"LOCAL_RANK\"])`"
NO_GROUP = "process group has not been initialized"


def evaluate(facts):
    """Return the checks of ddp-training, in the order of exercise.yaml."""
    ranks = ranks_of(facts)
    done = [r for r in ranks if r.reported]
    sharded = per_rank_check("sharded_data", _sharded_data, ranks)
    return [check_ranks_run(facts), per_rank_check("process_group", _process_group, ranks),
            per_rank_check("rank_device", _rank_device, ranks), per_rank_check("ddp_wrapped", _ddp_wrapped, ranks),
            _shards_cover(done) if sharded.passed else sharded, per_rank_check("set_epoch", _set_epoch, ranks),
            _in_sync(ranks), _rank0_only(ranks)]


def per_rank_check(check_id: str, decide, ranks):
    """Decide a check on every rank that reported (decide(rank) -> (message, line) or None); the first failure is
    the verdict, worded "every rank:" when all ranks failed it the same way. A rank the launcher stopped before it
    reported leaves the check undecided, never passed: which rank fails first is a race, and the stopped one may be
    the only one holding the mistake (two ranks on cuda:0 look right from rank 0)."""
    silent = [r for r in ranks if not r.reported]
    ranks = [r for r in ranks if r.reported]
    if not ranks:
        return check(check_id, False, "no rank finished its run, so there is nothing to check yet.")
    failures = [(r, f) for r, f in ((r, decide(r)) for r in ranks) if f is not None]
    if not failures and silent:
        # no line: mark_unreached words it "not reached" when the program stopped
        return check(check_id, False, f"{silent[0].label()} stopped before it reported, so this was not checked "
                                      "on it; fix the first failure and run again.")
    if not failures:
        return check(check_id, True)
    rank, (message, line) = failures[0]
    same = len(failures) == len(ranks) > 1 and len({m for _, (m, _) in failures}) == 1
    return check(check_id, False, f"{'every rank' if same else rank.label()}: {message}", line)


def _moved_to(rank, device: str, fallback: int | None) -> int | None:
    """The learner's line that moved a model onto device."""
    move = next((m for m in rank.events("module_move") if device in m.get("devices", ())), None)
    return move["line"] if move else fallback


def _model_device(rank) -> tuple[str | None, int | None]:
    """Where the rank's model trained (its first forward pass), else where it was wrapped if that was a GPU; and
    the line that put it there."""
    for e in rank.events("forward"):
        if e.get("has_params"):
            device = (e["param_devices"] or [None])[0]
            return device, _moved_to(rank, device, e.get("line"))
    for wrap in rank.events("ddp_wrap"):
        device = (wrap["param_devices"] or [None])[0]
        if device and device != "cpu":
            return device, _moved_to(rank, device, wrap.get("line"))
    return None, None


def _stopped_without_group(rank) -> int | None:
    """The line where the rank stopped because no process group existed, if it did."""
    exc = rank.outcome.get("exception") or {}
    return exc.get("line") if NO_GROUP in (exc.get("message") or "") else None


# ------------------------------------------------------------------------------------------------ per rank
def _process_group(r):
    early = [c for c in r.events("collective") if not c.get("initialized")]
    if early:
        c = early[0]
        return (f"{at(c['line'])}`dist.{c['op']}()` ran before the process group existed; call "
                "`dist.init_process_group(\"nccl\")` first thing.", c["line"])
    inits = r.events("pg_init")
    if not inits:
        line = _stopped_without_group(r)
        what = f"{at(line)}this line needs the process group, and " if line else ""
        return (f"{what}no process group was set up. Call `dist.init_process_group(\"nccl\")` once at the start, "
                "before the sampler and the model need it.", line)
    init = inits[0]
    if not init.get("ok"):
        return f"{at(init['line'])}`init_process_group` failed: {init.get('error')}", init["line"]
    backend = (init.get("backend") or "").lower()
    device, _ = _model_device(r)
    if device and device.startswith("cuda") and backend and "nccl" not in backend:
        return (f"{at(init['line'])}the process group uses `{init['backend']}`, but the model trains on a GPU: gloo "
                "is for CPU tensors and takes GPU tensors through the host. Use NCCL: "
                "`dist.init_process_group(\"nccl\")`.", init["line"])
    if device == "cpu" and backend == "nccl":
        return (f"{at(init['line'])}NCCL only moves GPU tensors, and the model trains on the CPU: use `gloo` for CPU "
                "training, or put the model on the rank's GPU.", init["line"])
    if not any(d.get("initialized") for d in r.events("pg_destroy")):
        return ("the process group was never destroyed; end the script with `dist.destroy_process_group()`, so the "
                "rank leaves the group cleanly.", None)
    return None


def _rank_device(r):
    device, line = _model_device(r)
    if device is None:
        return f"the model never ran, so it never reached {r.device}.", None
    if device != r.device:
        also = " (every rank put it there)" if device == "cuda:0" else ""
        return (f"{at(line)}the model went to {device}{also}, but this rank's GPU is {r.device}. Take the GPU from "
                f"the rank: {LOCAL_RANK}, then `device = torch.device(\"cuda\", local_rank)`.", line)
    for e in r.events("forward"):
        wrong = [t for t in e.get("inputs") or () if t.get("dim", 1) > 0 and t.get("device") != r.device]
        if wrong:
            t = wrong[0]
            name = f"`{t['names'][0]}`" if t.get("names") else "the batch"
            return (f"{at(e['line'])}{name} reached the model on {t.get('device')}; move every batch to this rank's "
                    f"GPU, {r.device}, inside the loop: `xb = xb.to(device)`.", e["line"])
    return None


def _ddp_wrapped(r):
    wraps = r.events("ddp_wrap")
    if not wraps:
        return ("the model was never wrapped in `DistributedDataParallel`, so every rank trains a copy of its own. "
                "After moving it: `model = DDP(model, device_ids=[local_rank])`.", None)
    w = wraps[0]
    var = (w.get("names") or ["model"])[0]
    if any(d == "cpu" for d in w["param_devices"]):
        return (f"{at(w['line'])}`{var}` was wrapped in DDP while its parameters were still on the CPU. Move it first, "
                f"then wrap: `DDP({var}.to(device), device_ids=[local_rank])`.", w["line"])
    if not w.get("device_ids"):
        return (f"{at(w['line'])}DDP was given no `device_ids`; for a model on one GPU, name that GPU: "
                "`DDP(model, device_ids=[local_rank])`.", w["line"])
    if w["device_ids"] != w["param_devices"]:
        return (f"{at(w['line'])}`device_ids` says {', '.join(w['device_ids'])} but `{var}` is on "
                f"{', '.join(w['param_devices'])}; both must be this rank's GPU, `device_ids=[local_rank]`.",
                w["line"])
    # the model inside the wrapper, called with gradients on (under no_grad it is evaluation, which is fine)
    inner = [e for e in r.events("forward") if e.get("id") == w.get("module_id") and e.get("grad", True)]
    if inner:
        return (f"{at(inner[0]['line'])}the training step called the model inside the wrapper, so DDP never "
                "averaged its gradients; call the wrapped model: `loss = loss_fn(ddp_model(xb), yb)`.",
                inner[0]["line"])
    if not any(e.get("module") == WRAPPER for e in r.events("forward")):
        return "the wrapped model never ran; train with it, not with the model you wrapped.", None
    return None


def _sharded_data(r):
    loader = next(iter(r.events("loader")), None)
    if loader and loader.get("error"):
        return (f"{at(loader['line'])}torch refused the DataLoader: {loader['error']}. The DistributedSampler "
                "shuffles already: drop `shuffle=True`.", loader["line"])
    if loader and loader.get("sampler") != "DistributedSampler":
        kind = "shuffles the whole dataset" if loader.get("shuffle") else "reads the whole dataset"
        return (f"{at(loader['line'])}the DataLoader {kind}, so every rank trains on every sample. Give it a shard: "
                "`sampler = DistributedSampler(dataset)`, then `DataLoader(dataset, batch_size=32, "
                "sampler=sampler)`.", loader["line"])
    world = int(r.report.get("world_size") or 1)
    for s in r.events("sampler"):
        if s["num_replicas"] != world or s["rank"] != r.rank:
            return (f"{at(s['line'])}the DistributedSampler shards for rank {s['rank']} of {s['num_replicas']}, not "
                    f"for rank {r.rank} of {world}; let it ask the process group: `DistributedSampler(dataset)`.",
                    s["line"])
    return None


def _set_epoch(r):
    every = r.events("sampler_epoch")
    # the passes that trained: a peek such as `len(next(iter(loader))[0])` uses one batch of a pass
    passes = [p for p in every if p.get("used", 0) * 2 >= p["n"]]
    if not every:
        return ("there is no DistributedSampler to tell the epoch; add one, then call `sampler.set_epoch(epoch)` at "
                "the start of each epoch.", None)
    for before, after in zip(passes, passes[1:]):
        if before["id"] == after["id"] and before["epoch"] == after["epoch"]:
            calls = r.events("set_epoch")
            line = calls[0]["line"] if calls else None
            why = (f"{at(line)}`set_epoch` gave it the same value, {after['epoch']}, twice" if calls
                   else "`sampler.set_epoch(epoch)` was never called")
            return (f"the sampler gave the same order in two epochs: {why}. Call `sampler.set_epoch(epoch)` first "
                    "thing in every epoch, with the epoch's number.", line)
    return None


# ------------------------------------------------------------------------------------------------ across ranks
def _shards_cover(ranks):
    """The ranks' first passes over their samplers: disjoint (but for the sampler's padding) and complete."""
    passes = [next((p for p in r.events("sampler_epoch") if p.get("indices") is not None), None) for r in ranks]
    if not ranks or not all(passes):
        return check("sharded_data", False, "no DistributedSampler gave a rank its samples; build the DataLoader "
                                            "with `sampler=DistributedSampler(dataset)` and loop over it.")
    size = passes[0]["dataset_len"]
    seen = [set(p["indices"]) for p in passes]
    union = set().union(*seen)
    padding = sum(p["n"] for p in passes) - size
    overlap = sum(len(s) for s in seen) - len(union)
    if len(union) < size or overlap > max(0, padding):
        return check("sharded_data", False, f"the ranks' shards overlap or miss samples ({len(union)} of {size} "
                                            f"samples seen, {overlap} seen twice); give every rank "
                                            "`DistributedSampler(dataset)` with the same dataset.")
    return check("sharded_data", True)


def _in_sync(ranks):
    if not ranks or not all(r.reported for r in ranks):
        return check("in_sync", False, "not every rank finished training, so their parameters cannot be compared.")
    digests = [r.dist.get("params_digest") for r in ranks]
    if not all(digests):
        idle = next(r for r, d in zip(ranks, digests) if not d)
        return check("in_sync", False, f"{idle.label()} never took an optimizer step, so it trained nothing.")
    if len(set(digests)) > 1:
        return check("in_sync", False, "after training, the ranks hold different parameters, so they no longer "
                                       "train one model. Every optimizer step must follow a `backward()` through "
                                       "the DDP-wrapped model on every rank: that is where DDP averages the "
                                       "gradients (no `no_sync()` around every step, no step on one rank only).")
    return check("in_sync", True)


def _rank0_only(ranks):
    if not ranks:
        return check("rank0_only", False, "no rank finished its run, so there is nothing to check yet.")
    for r in ranks:
        saves = r.events("save")
        if r.rank != 0 and saves:
            s = saves[0]
            return check("rank0_only", False, f"{r.label()}: {at(s['line'])}rank {r.rank} wrote the checkpoint too; "
                                              "the ranks hold the same model, so one copy is enough and several "
                                              "writers clash on the file. Save on rank 0 only: `if "
                                              "dist.get_rank() == 0:`.", s["line"])
    rank0 = next((r for r in ranks if r.rank == 0), None)
    saves = rank0.events("save") if rank0 else []
    if not saves:
        return check("rank0_only", False, "rank 0 never saved the checkpoint; at the end, on rank 0: "
                                          "`torch.save(model.module.state_dict(), \"model.pt\")`.")
    s = saves[-1]
    if s.get("what") == "module":
        return check("rank0_only", False, f"{at(s['line'])}the whole `{s.get('type')}` object was saved; save its "
                                          "weights: `torch.save(model.module.state_dict(), \"model.pt\")`.",
                     s["line"])
    if s.get("prefixed"):
        return check("rank0_only", False, f"{at(s['line'])}the saved keys start with `module.` (the DDP wrapper's "
                                          "state_dict), so they will not load into the plain model; save the "
                                          "wrapped model's own: `model.module.state_dict()`.", s["line"])
    return check("rank0_only", True)
