"""Decide accelerate-loop's checks from each rank's facts (runs outside the sandbox).

Accelerate does the device work the learner used to write: `prepare` wraps the model in DDP on the rank's GPU
(a `ddp_wrap` fact on the learner's `prepare` line) and gives each DataLoader a shard (a `loader` fact that
accelerate, not the learner, made: `direct` false); `accelerator.backward` leaves no `backward` fact of the
learner's own; `gather_for_metrics` shows as a `library_collective` fact naming the Accelerator method the
learner's line called.
The per-rank and across-rank helpers are ddp-training's, read from the sibling exercise (as two-machines does),
so that a fix to one is a fix to both.
"""

import importlib.util
from pathlib import Path

from app.grading.facts import at, check
from app.grading.ranks import check_ranks_run, ranks_of

_PATH = Path(__file__).resolve().parent.parent / "ddp-training" / "checks.py"
_SPEC = importlib.util.spec_from_file_location("course_checks_ddp_training_for_accelerate_loop", _PATH)
_DDP = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_DDP)

DATASETS = {128: "`loader`", 50: "`val_loader`"}  # the exercise's training and validation sets, by size
PREPARE = "`model, optimizer, loader, val_loader = accelerator.prepare(model, optimizer, loader, val_loader)`"


def evaluate(facts):
    """Return the checks of accelerate-loop, in the order of exercise.yaml."""
    ranks = ranks_of(facts)
    return [check_ranks_run(facts), _DDP.per_rank_check("prepared", _prepared, ranks),
            _DDP.per_rank_check("no_manual_moves", _no_manual_moves, ranks),
            _DDP.per_rank_check("accelerator_backward", _accelerator_backward, ranks),
            _DDP.per_rank_check("gathered_metrics", _gathered_metrics, ranks), _DDP._in_sync(ranks),
            _main_process_save(ranks)]


def _prepared(r):
    if not r.events("ddp_wrap"):
        move = next(iter(r.events("module_move")), None)
        line = move["line"] if move else None
        return (f"{at(line)}the model never went through `accelerator.prepare`, so it is not wrapped in DDP and each "
                f"rank trains a copy of its own. Prepare it with the rest: {PREPARE}.", line)
    prepared = {e.get("dataset_len") for e in r.events("loader") if e.get("direct") is False}
    missing = [name for size, name in DATASETS.items() if size not in prepared]
    if missing:
        built = next((e for e in r.events("loader") if e.get("dataset_len") not in prepared), None)
        line = built["line"] if built else None
        return (f"{at(line)}{' and '.join(missing)} never went through `accelerator.prepare`, so every rank reads "
                f"all of it, on the host. Prepare both loaders: {PREPARE}.", line)
    wrapped = [e for e in r.events("forward") if e.get("module") == _DDP.WRAPPER]
    if not wrapped:
        return "the prepared model never ran; train with the model `prepare` returned.", None
    return None


def _no_manual_moves(r):
    moves = r.events("module_move") + r.events("move")
    if not moves:
        return None
    m = min(moves, key=lambda e: e.get("line") or 0)
    names = m.get("names") or []
    what = f"`{names[0]}`" if names else "a tensor"
    return (f"{at(m['line'])}{what} is still moved by hand; `accelerator.prepare` already put the model on this "
            f"rank's GPU ({r.device}) and its loaders hand out batches there. Delete the `.to(device)`.", m["line"])


def _accelerator_backward(r):
    own = r.events("backward")
    if not own:
        return None
    line = own[0].get("line")
    return (f"{at(line)}`loss.backward()` goes around Accelerate, which scales the loss for mixed precision and "
            "gradient accumulation there; call `accelerator.backward(loss)`.", line)


def _gathered_metrics(r):
    calls = r.events("library_collective")
    if any(c.get("via") == "Accelerator.gather_for_metrics" for c in calls):
        return None
    plain = next((c for c in calls if c.get("via") == "Accelerator.gather"), None)
    if plain:
        return (f"{at(plain['line'])}`accelerator.gather` keeps the samples the last batch repeats to keep the ranks "
                "even, so the metric counts some of the 50 points twice; use "
                "`accelerator.gather_for_metrics(...)`, which drops them.", plain["line"])
    return ("each rank measured only its own shard of the validation set, so each printed a different number; "
            "gather every rank's errors before the mean: `errors.append(accelerator.gather_for_metrics((model(xb) "
            "- yb) ** 2))`.", None)


def _main_process_save(ranks):
    if not ranks:
        return check("main_process_save", False, "no rank finished its run, so there is nothing to check yet.")
    for r in ranks:
        saves = r.events("save")
        if r.rank != 0 and saves:
            s = saves[0]
            return check("main_process_save", False,
                         f"{r.label()}: {at(s['line'])}rank {r.rank} wrote the checkpoint too; the ranks hold the same "
                         "model, so one copy is enough and several writers clash on the file. Save on the main "
                         "process only: `if accelerator.is_main_process:`.", s["line"])
    rank0 = next((r for r in ranks if r.rank == 0), None)
    saves = rank0.events("save") if rank0 else []
    if not saves:
        return check("main_process_save", False, "the main process never saved the checkpoint; at the end: `if "
                                                 "accelerator.is_main_process: torch.save(accelerator.unwrap_model("
                                                 "model).state_dict(), \"model.pt\")`.")
    s = saves[-1]
    if s.get("what") == "module":
        return check("main_process_save", False, f"{at(s['line'])}the whole `{s.get('type')}` object was saved; save "
                                                 "its weights: `accelerator.unwrap_model(model).state_dict()`.",
                     s["line"])
    if s.get("prefixed"):
        return check("main_process_save", False, f"{at(s['line'])}the saved keys start with `module.` (the DDP "
                                                 "wrapper `prepare` put around the model), so they will not load into "
                                                 "the plain model; save the unwrapped one's: "
                                                 "`accelerator.unwrap_model(model).state_dict()`.", s["line"])
    return check("main_process_save", True)
