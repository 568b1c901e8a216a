"""The fork server's bookkeeping for one running job: output lines, caps, report, and the final result."""

from __future__ import annotations

import codecs
import json
import os
import re
import signal
import time
from typing import Callable

# bytes; the harness's report (placement trace) is JSON, far smaller than this
REPORT_MAX = 4 << 20
# bytes; a line longer than this is passed on in pieces so a newline-free flood still streams
LINE_CHUNK = 8 << 10
# bytes of one status-pipe token kept (the harness writes "K" or an exit code; anything longer is the learner's)
STATUS_TOKEN_MAX = 16
EXIT_CODE = re.compile(rb"[0-9]{1,3}")
# why a report is not passed on to the grader (the grader then says the program ended before its results came)
REPORT_REFUSED = {
    "overflow": "its report was larger than the sandbox accepts",
    "unreadable": "the grader could not read this run's report",
    "key": "the program asked for the grader's key itself, so its report was discarded",
}

LIMIT_MESSAGES = {
    "wall": "wall-clock limit of {wall_s:g} s reached; the program was stopped",
    "cpu": "CPU time limit of {cpu_s} s reached; the program was stopped",
    "memory": "memory limit of {memory_mib} MiB reached",
    "output": "output limit of {output_kib} KiB reached; the rest of the output was dropped and the program stopped",
    "pids": "process/thread limit of {pids} reached (a fork or a new thread was refused)",
}
# what a limit's sentence adds for a job on a simulated GPU with its clock (its host's `clock`, docs/grading.md "The
# program's clocks"): the program's clocks read the modeled card's time, and this host computes every op's values on
# its CPU, so a loop that runs until some of that time has passed repeats as often as on the real card, each time at
# the CPU's pace (torch.utils.benchmark's blocked_autorange, which PyTorch's timing recipe uses, is such a loop)
# the CPU limit too: torch's kernels run on every core of the job, so such a loop may spend its CPU seconds first
_OUTRUN = ("; on a simulated GPU this host computes every op's values on its CPU, far slower than the card's modeled "
           "time, so a loop that runs until some time has passed (time.perf_counter, Timer.blocked_autorange) repeats "
           "as often as on the real card: time a fixed number of runs instead, e.g. Timer(...).timeit(100)")
MODELED_CLOCK_HINTS = {"wall": _OUTRUN, "cpu": _OUTRUN}


def limit_message(limit: str, limits, modeled_clock: bool = False) -> str:
    """Return the human sentence for a limit that was hit (modeled_clock: the job ran on a simulated GPU's clock)."""
    return LIMIT_MESSAGES[limit].format(
        wall_s=limits.wall_s, cpu_s=limits.cpu_s, memory_mib=limits.memory_bytes >> 20,
        output_kib=limits.output_bytes >> 10, pids=limits.pids,
    ) + (MODELED_CLOCK_HINTS.get(limit, "") if modeled_clock else "")


class RunningJob:
    """One job between its payload being written and its result being sent."""

    def __init__(self, job_id: str, child, send: Callable[[dict], None], key: str | None = None,
                 modeled_clock: bool = False) -> None:
        self.id = job_id
        self.modeled_clock = modeled_clock  # jobqueue.has_modeled_clock(its payload): its limits' sentences say more
        self.key = key  # what the report must echo; handed over once, when the harness asks (channel.py)
        self.key_requests = 0
        self.status_token = bytearray()
        self.status_skip = False  # inside an overlong token: drop bytes up to the next newline
        self.child = child
        self.limits = child.limits
        self.send = send
        self.started = time.monotonic()
        self.deadline = self.started + self.limits.wall_s
        self.pending = {"stdout": bytearray(), "stderr": bytearray()}
        self.text: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.out_bytes = 0
        self.report = bytearray()
        self.report_overflow = False
        self.limit_hit: str | None = None
        self.cancelled = False
        self.killed = False  # SIGKILL sent; waiting for the processes to be reaped
        self.noted = False  # a [sandbox] marker line was added
        self.status: int | None = None  # raw wait status of the zygote's child (the job process)
        self.cpu_s: float | None = None
        self.cpu_base = 0.0  # CPU seconds the child's cgroup had used when the job was handed over
        self.pids_refused = 0  # forks the pids cgroup had refused when the server last lowered RLIMIT_NPROC
        self.batch: list[list[str]] = []

    def cpu_used(self) -> float | None:
        """CPU seconds of the job's processes since hand-over (a warm child's warm-up is not the learner's)."""
        cpu = self.child.cgroup.cpu_seconds()
        return None if cpu is None else max(0.0, cpu - self.cpu_base)

    # ------------------------------------------------------------------ output
    def _emit(self, stream: str, raw: bytes, newline: bool) -> None:
        line = raw.decode("utf-8", errors="replace")
        self.text[stream].append(line + ("\n" if newline else ""))
        self.batch.append([stream, line])

    def _send_batch(self) -> None:
        if self.batch:  # one frame per read, not per line: a flood of short lines stays cheap
            self.send({"op": "out", "id": self.id, "lines": self.batch})
            self.batch = []

    def on_output(self, stream: str, data: bytes) -> bool:
        """Take bytes the job wrote; return False when the output cap was exceeded (the job must be stopped)."""
        room = self.limits.output_bytes - self.out_bytes
        over = len(data) > room
        data = data[: max(room, 0)]
        self.out_bytes += len(data)
        buf = self.pending[stream]
        buf += data
        while (nl := buf.find(b"\n")) >= 0:
            self._emit(stream, bytes(buf[:nl]), True)
            del buf[: nl + 1]
        while len(buf) >= LINE_CHUNK:
            self._emit(stream, bytes(buf[:LINE_CHUNK]), False)
            del buf[:LINE_CHUNK]
        self._send_batch()
        return not over

    def flush(self) -> None:
        """Pass on the unterminated last line of each stream."""
        for stream, buf in self.pending.items():
            if buf:
                self._emit(stream, bytes(buf), False)
                buf.clear()
        self._send_batch()

    def note(self, message: str) -> None:
        """Add a sandbox marker line to stderr (it does not count against the output cap)."""
        self.flush()
        self.noted = True
        self._emit("stderr", f"[sandbox] {message}".encode(), True)
        self._send_batch()

    def on_report(self, data: bytes) -> None:
        """Take bytes of the harness's report; past REPORT_MAX the report is dropped."""
        if len(self.report) + len(data) > REPORT_MAX:
            self.report_overflow = True
            return
        self.report += data

    def on_status(self, data: bytes) -> list[bytes]:
        """Take bytes of the status pipe; return the complete tokens ("K", or an exit code) now readable.

        Only short newline-ended tokens count; the harness starts each with a newline, so whatever the learner's
        code wrote there before (it holds the pipe too) ends as a token of its own and is ignored."""
        out = []
        *complete, rest = data.split(b"\n")  # rest: what follows the last newline
        for piece in complete:
            token = b"" if self.status_skip else bytes(self.status_token) + piece
            self.status_token.clear()
            self.status_skip = False
            if token and len(token) <= STATUS_TOKEN_MAX:
                out.append(token)
        if not self.status_skip:
            if len(self.status_token) + len(rest) > STATUS_TOKEN_MAX:
                self.status_token.clear()
                self.status_skip = True
            else:
                self.status_token += rest
        return out

    def take_key(self) -> bytes | None:
        """The bytes to write on the payload pipe for a key request: the key the first time, None after."""
        self.key_requests += 1
        if self.key_requests > 1:
            return None
        return (self.key or "").encode("ascii", "replace") + b"\n"

    # ------------------------------------------------------------------ result
    def _decide_limit(self, cgroup_oom: bool, pids_hit: bool, sig: int | None, stderr: str) -> str | None:
        if self.limit_hit:
            return self.limit_hit
        if cgroup_oom:
            return "memory"
        cpu = self.cpu_s or 0.0
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.limits.cpu_s * 0.95):
            return "cpu"
        tail = stderr.rstrip().rsplit("\n", 3)[-3:]
        if any(line.startswith("MemoryError") for line in tail):
            return "memory"
        if pids_hit:
            return "pids"
        return None

    def result(self, *, cgroup_oom: bool, pids_hit: bool, setup_error: str | None) -> dict:
        """Build the result message; call once the job's processes are gone."""
        self.flush()
        code = _exit_code(self.status)
        exit_code, sig = (None, -code) if code is not None and code < 0 else (code, None)
        stderr = "".join(self.text["stderr"])
        limit = None if setup_error or self.cancelled else self._decide_limit(cgroup_oom, pids_hit, sig, stderr)
        if setup_error:
            status, message = "error", setup_error
        elif self.cancelled:
            status, message = "cancelled", "cancelled before it finished"
        elif limit:
            status, message = "limit", limit_message(limit, self.limits, self.modeled_clock)
            if not self.noted:  # wall, CPU and output limits are noted when the server stops the job
                self.note(message)
        elif exit_code == 0:
            status, message = "ok", "exited normally"
        else:
            status = "failed"
            message = f"exit code {exit_code}" if sig is None else f"killed by signal {signal.Signals(sig).name}"
        refused = self._refused_report()
        if refused:
            self.note(REPORT_REFUSED[refused])
        return {
            "status": status, "exit_code": exit_code, "signal": sig,
            "stdout": "".join(self.text["stdout"]), "stderr": "".join(self.text["stderr"]),
            "duration_ms": int((time.monotonic() - self.started) * 1000), "limit_hit": limit,
            "report": None, "message": message,
        }

    def _refused_report(self) -> str | None:
        """Why the report is not passed on (a key in REPORT_REFUSED), or None. Whether it reads as a JSON object is
        for the runner to find (read_report): it decodes the report anyway."""
        if self.key_requests > 1:
            return "key"
        if self.report_overflow:
            return "overflow"
        return None

    def passed_report(self) -> tuple[bytes | None, bool]:
        """(the report's bytes as they came, or None: none came or it is refused; whether the job asked for its
        key). They go to the runner unread, as the attachment of the result's frame (protocol.py): decoding them
        here to check them was most of the single-threaded server's work on a graded job's end (0.3-0.55 ms of
        CPU for training-loop's 51 KB report, on the path from the job's exit to its verdict)."""
        if not self.report or self._refused_report():
            return None, bool(self.key_requests)
        return bytes(self.report), bool(self.key_requests)


def read_report(data: bytes, *, asked: bool) -> tuple[dict | None, str | None]:
    """In the runner: (the report a job's bytes hold, None), or (None, why they are refused: "unreadable"), or
    (None, None) where the job never asked for its key (whatever the learner's code wrote there, and no report of
    the harness's)."""
    # UTF-8 only, as the harness writes it (json.loads would take UTF-16 and -32 bytes too); a UTF-8 byte order mark,
    # which json.loads skips in bytes, is skipped too
    data = data[len(codecs.BOM_UTF8):] if data.startswith(codecs.BOM_UTF8) else data
    try:
        value = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # bytes the learner's code wrote; nesting too deep for the parser
        value = None
    if not isinstance(value, dict):
        return None, "unreadable" if asked else None
    return value, None


def _exit_code(status: int | None) -> int | None:
    """The exit code (negative: the signal) of a wait status; None when there is none or it is not one."""
    if status is None:
        return None
    try:
        return os.waitstatus_to_exitcode(status)
    except (ValueError, OverflowError):
        return None
