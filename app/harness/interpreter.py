"""What `python main.py` gives a script that a job would otherwise inherit from the fork server.

Every job is forked from the warm fork server, and every rank from its launcher or machine keeper, so each would
start with the server's own interpreter state. What of it a script can see, and what a new interpreter gives it
instead (its warnings' places too: warning_lines.py):

- **Its command line.** `sys.argv` was the server's (its path, its whole configuration as JSON, a descriptor
  number), so a script that parses its arguments (argparse, as training scripts started by torchrun do) stopped at
  "unrecognized arguments" with the sandbox's configuration on screen; `sys.orig_argv` said `-m
  app.sandbox.server`, and `sys.path[0]` was the server's folder, not the script's. A script started as
  `python main.py`, `torchrun ... main.py` or `accelerate launch main.py` (no arguments of its own: the course
  passes none) has `sys.argv == ["main.py"]` and its own folder first on sys.path.
- **Its file.** The learner's code ran from the payload, with no file anywhere: `open(__file__)` failed, and a
  process started with spawn (multiprocessing's "spawn" context, `DataLoader(..., multiprocessing_context="spawn")`,
  `torch.multiprocessing.spawn`) looked for it in the server's folder ("No such file or directory:
  '/srv/.../main.py'"). The file is now written in the job's working directory (an isolated job's own temp
  dir: OWN_FOLDER), and multiprocessing looks there. A spawned process is a new interpreter: it imports the plain
  torch of the sandbox, without the simulated GPU (a spawned worker that only reads data, as lesson 4 recommends,
  behaves as on a real host; one that asks for CUDA finds none, and `torch.multiprocessing.spawn` on simulated GPUs
  says so in one line: machine/unsimulated.py).
- **Its random state.** An unseeded `torch.rand(2)` printed the same numbers in every job one server ran (one
  learner's run after another's, every rank of a job alike), where `python main.py` prints new ones each time and
  torchrun's ranks each draw their own. A new interpreter seeds:
  - torch's CPU generator from the OS (ATen/CPUGeneratorImpl.cpp, getDefaultCPUGenerator:
    c10::detail::getNonDeterministicRandom), which `torch.initial_seed()` reports;
  - NumPy's global RandomState from the OS, when numpy.random is imported (numpy/random/mtrand.pyx: RandomState());
  - Python's `random` from the OS, which CPython itself redoes in a forked child (random.py: os.register_at_fork).
  CUDA's generators are left alone: a new process's CUDA seed is the fixed default_rng_seed_val, 67280421310721
  (ATen/cuda/CUDAGeneratorImpl.h), which the simulated GPU reports already, so unseeded GPU values repeat run to
  run there as on a real card.
- **Its `__main__` module.** The learner's file ran in a dict while `sys.modules["__main__"]` was the fork server's
  module, so anything that finds a class of the script's by its module failed: `torch.save(model)` of a whole model
  and `pickle.dumps` raised "Can't pickle <class '__main__.Net'>: attribute lookup Net on __main__ failed", and
  `inspect.getsource(Net)` looked in the server's file. The file now runs in a module of its own, registered as
  `__main__` (`__builtins__` the builtins module, `__spec__` and `__package__` None, as Python's runpy leaves a
  script's).
- **Its end.** The job ended with `os._exit` as soon as the file had run: a non-daemon thread still working was cut
  off and `atexit` callbacks never ran, where an interpreter waits for those threads (threading's shutdown: its
  executors are told to stop first) and then runs the callbacks, last registered first (`finish()`), and the
  finalizers the program made. The fork server's own callbacks are not the program's: cleared at the start, but
  for those a new interpreter registers too (INTERPRETER_EXIT_CALLBACKS): multiprocessing's joins the processes
  the program started and left running (a child's output after the parent's last line was lost), and stops its
  daemonic ones.

What cannot be made new in a forked process stays the server's: the string hash secret (PYTHONHASHSEED is read when
an interpreter starts), so `hash("abc")` and a set of strings' order are the same in every job of one server.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import os
import random
import sys
import threading
import types
import weakref

import torch

from app.harness import warning_lines

# the working directory is the job's own (in_own_folder(), from the sandbox's job process): only then is the learner's
# file written there (a job run outside a sandbox, or by a sandbox without isolation, shares its folder)
OWN_FOLDER = False
_AHEAD_IN: int | None = None  # the process that did ahead() (forked children inherit the value, not the state)
# after _own_exit_callbacks: the exit callbacks kept, and the index of the program's first finalizer
_KEPT_CALLBACKS = 0
_FIRST_FINALIZER = 0
SEED_BYTES = 8  # torch's seeds are 64-bit (torch.manual_seed takes up to 0xffff_ffff_ffff_ffff)
MT_STATE_WORDS = 624  # NumPy's legacy RandomState: MT19937's 624 32-bit words (numpy/random/_mt19937.pyx)
MT_STATE_BYTES = MT_STATE_WORDS * 4
# the exit callbacks of the server's that a new interpreter running the script has too, in the order `import torch`
# registers them (the last runs first): DataLoader iterators learn the interpreter is exiting, and multiprocessing
# terminates the program's daemonic processes and joins the others
INTERPRETER_EXIT_CALLBACKS = (("torch.utils.data._utils", "_set_python_exit_flag"),
                              ("multiprocessing.util", "_exit_function"))


def start(filename: str, code: str | None = None, seed: int | None = None) -> int:
    """Give this process what a new interpreter running the learner's `filename` has: its command line, its folder
    first on sys.path, the file itself there (`code`; None: written already), and a random state drawn from the OS
    (or from `seed`: a copy of the graded run elsewhere starts where the run started); return the seed, which
    `torch.initial_seed()` then reads."""
    sys.argv = [filename]
    sys.orig_argv = [sys.executable, filename]
    folder = os.getcwd()
    if sys.path:
        sys.path[0] = folder
    if code is not None and OWN_FOLDER:
        _write_script(folder, filename, code)
    processes = sys.modules.get("multiprocessing.process")
    if processes is not None:  # where a process started with spawn finds __main__'s file (the server's folder)
        processes.ORIGINAL_DIR = folder
    if _AHEAD_IN != os.getpid():  # a rank, a spare: forked since, so its random state is another's
        ahead()
    return fresh_random_state(seed) if seed is not None else torch.default_generator.initial_seed()


def ahead() -> None:
    """What needs no job, done in the process that runs it, before it comes (a waiting sandbox child: ~0.6 ms of
    CPU, first runs of this code in a fresh fork, taken off the job's start): the warnings' places, the exit
    callbacks, and a random state drawn from the OS."""
    global _AHEAD_IN
    warning_lines.install()  # a warning names the script's line (or torch's), never the harness's
    _own_exit_callbacks()
    fresh_random_state()
    _AHEAD_IN = os.getpid()


def finish() -> None:
    """What an interpreter does once the script's file has run (to its end, to an uncaught exception whose
    traceback is shown, or to sys.exit), before it exits: wait for the program's non-daemon threads, then run its
    atexit callbacks (one that raises is reported as Python reports it, and the next runs). Each only where the
    program left it something to do (their first run in a job cost ~0.25 ms of CPU): another thread alive, a
    callback of its own, a finalizer it made, a process or a finalizer of multiprocessing's."""
    if threading.active_count() > 1:
        threading._shutdown()
    if (atexit._ncallbacks() > _KEPT_CALLBACKS or next(weakref.finalize._index_iter) > _FIRST_FINALIZER
            or _multiprocessing_left_work()):
        # no cyclic collection meanwhile: CPython collects at shutdown only after the callbacks, and a __del__ run
        # before them does what it would not do then (a DataLoader iterator left by an exception joins its
        # workers, 5 s each, where after torch's exit flag is set it does nothing)
        gc.disable()
        atexit._run_exitfuncs()


def _multiprocessing_left_work() -> bool:
    """True when the program started a process through multiprocessing (a DataLoader's workers too) or made one of
    its finalizers (a Queue's, a Pool's): its exit callback has them to join or run (the server has none: a job
    starts with neither)."""
    processes, util = sys.modules.get("multiprocessing.process"), sys.modules.get("multiprocessing.util")
    return bool(processes is not None and processes._children) or bool(util is not None and util._finalizer_registry)


def _own_exit_callbacks() -> None:
    """Leave the process only the exit callbacks a new interpreter has (INTERPRETER_EXIT_CALLBACKS: torch's
    DataLoader flag, multiprocessing's, which joins the program's child processes) and the one for the finalizers
    the program makes (weakref.finalize's), not the fork server's callbacks (running them took ~30 ms a job) nor
    its finalizers. The server has no process or finalizer of multiprocessing's for its callback to find."""
    global _KEPT_CALLBACKS, _FIRST_FINALIZER
    atexit._clear()
    for module, name in INTERPRETER_EXIT_CALLBACKS:
        callback = getattr(sys.modules.get(module), name, None)  # None: not imported, or not in this release
        if callback is not None:
            atexit.register(callback)
    atexit.register(_programs_finalizers)
    weakref.finalize._registered_with_atexit = True  # a finalizer the program makes registers nothing more
    # the finalizers from here on are the program's (marking the server's ~170 off cost 0.5 ms, first run in a fork)
    _FIRST_FINALIZER = next(weakref.finalize._index_iter) + 1
    _KEPT_CALLBACKS = atexit._ncallbacks()


def _programs_finalizers() -> None:
    """weakref.finalize's exit callback (finalize._exitfunc) for the finalizers the program made, newest first: not
    the fork server's."""
    registry = weakref.finalize._registry
    while True:
        pending = [(info.index, f) for f, info in list(registry.items())
                   if info.atexit and info.index >= _FIRST_FINALIZER]
        if not pending:
            break
        try:
            max(pending)[1]()  # called, it leaves the registry
        except Exception:  # as _exitfunc: reported, and the next one runs
            sys.excepthook(*sys.exc_info())
    weakref.finalize._shutdown = True


def _write_script(folder: str, filename: str, code: str) -> None:
    """Put the learner's file in its folder (the job's own temp dir), as the file `python main.py` runs is there:
    `open(__file__)` reads it, and a process started with spawn (multiprocessing's "spawn" context,
    `DataLoader(..., multiprocessing_context="spawn")`) imports it as `__mp_main__`. Written whole under a name of
    this process's, then renamed: ranks of one machine write it at once, and none reads half a file. Only a plain
    file name; a folder that refuses it (full, read-only) leaves the program without it, as before."""
    if os.path.basename(filename) != filename or filename.startswith("."):
        return
    path = os.path.join(folder, filename)
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "w", encoding="utf-8") as f:
            f.write(code)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)


def main_module(filename: str) -> dict:
    """A new `__main__` module for the learner's file, registered in sys.modules as a script's is; return its
    namespace, which the file runs in."""
    module = types.ModuleType("__main__")  # __doc__, __package__, __loader__ and __spec__ None
    module.__file__ = filename
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    return module.__dict__


def fresh_random_state(seed: int | None = None) -> int:
    """Seed torch's CPU generator, and NumPy's global state where numpy.random is imported, from the OS or from
    `seed`; return the seed."""
    if seed is None:
        seed = int.from_bytes(os.urandom(SEED_BYTES), "little")
    torch.default_generator.manual_seed(seed)
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:  # a whole MT19937 state from the seed, as RandomState() draws one from the OS
        key = sys.modules["numpy"].frombuffer(random.Random(seed).randbytes(MT_STATE_BYTES), dtype="uint32")
        numpy_random.set_state(("MT19937", key, MT_STATE_WORDS))  # a quarter of seed([...])'s cost, first run
    return seed
