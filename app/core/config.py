"""The one settings object. Every value comes from the environment with the prefix COURSE_."""

from __future__ import annotations

from functools import lru_cache
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app import ROOT
from app.core.mail import check_smtp_url
from app.core.unlock import parse_unlock

KiB = 1 << 10
MiB = 1 << 20

# Shipped so `make serve` works out of the box; refused outside development (see check_secret).
DEFAULT_SECRET = "dev-insecure-change-me"


class Settings(BaseSettings):
    """Configuration for the site, the runner and the sandbox.

    Each field is one environment variable: `COURSE_` + the field name in capitals. The README's settings table
    is checked against this class by a test, so a new field needs a line there too.
    """

    model_config = SettingsConfigDict(env_prefix="COURSE_", extra="ignore")

    # --- site
    env: Literal["development", "production", "test"] = "development"
    host: str = "127.0.0.1"
    port: int = 8000
    secret_key: str = DEFAULT_SECRET
    database_url: str = f"sqlite:///{ROOT / 'var' / 'course.db'}"
    lessons_dir: Path = ROOT / "lessons"
    exercises_dir: Path = ROOT / "exercises"
    templates_dir: Path = ROOT / "templates"
    static_dir: Path = ROOT / "static"
    # requests per minute per client address; guessing passwords should be slow
    login_rate_limit: str = "10/minute"
    signup_rate_limit: str = "5/minute"
    # requests per minute per client address, and mails per hour per account; each /forgot may send a mail
    forgot_rate_limit: str = "5/minute"
    forgot_mail_rate_limit: str = "3/hour"
    # submissions per minute per learner; a person rarely runs code more than once every few seconds
    submission_rate_limit: str = "30/minute"
    # submissions per minute per client address, whatever the cookie: fresh cookies do not make fresh people.
    # One address can be a classroom behind NAT; raise it for one (docs/security.md#rate-limits)
    submission_address_rate_limit: str = "60/minute"
    # comments (and replies) per minute per learner, and per client address
    comment_rate_limit: str = "6/minute"
    comment_address_rate_limit: str = "30/minute"
    # the proxies whose X-Forwarded-For names the client address the limits count: a comma list of addresses or
    # networks ("10.0.0.2", "10.0.0.0/8,::1"), or "*" for any peer. Empty: trust nobody, count the peer itself
    trusted_proxies: str = ""
    # characters; a comment is a message, not an essay
    comment_max_chars: int = 5000
    # when the reference solution is shown before a pass: failures:N (after N counted failed attempts), deadline
    # (after the learner's deadline) or never (not even after a pass); an exercise's `solution_unlock:` wins
    # (app/core/unlock.py)
    solution_unlock: str = "failures:5"
    # people (signed in, not the author) whose open reports hide a comment until an instructor reviews it
    comment_report_hide_at: int = Field(default=3, ge=1)
    # bytes of one request body, refused with 413 before it is read; above the largest program as JSON
    # (sandbox_source_bytes, up to 6x when escaped) and the longest comment, far below what hurts memory
    max_body_bytes: int = 1 * MiB
    # the site's address as people reach it (https://course.example.org); password reset links start with it.
    # Empty: http://HOST:PORT. Never taken from a request's Host header, which the sender controls.
    public_url: str = ""
    # seconds a password reset link stays usable; long enough to read a mail, short enough to be useless later
    reset_link_ttl_s: int = 3600
    # where /forgot mails reset links: smtp://[user:password@]host[:port] (STARTTLS when the server offers it)
    # or smtps://... (TLS from the start). Empty: no mail; `course users reset-link EMAIL` prints a link instead
    smtp_url: str = ""
    # the From: address of those mails
    mail_from: str = "course@localhost"

    # --- runner (the queue in front of the sandbox)
    runner: Literal["local", "celery"] = "local"
    # jobs running at once; more than the core count only adds contention
    runner_concurrency: int = 2
    # jobs waiting beyond those running; past this, submit() refuses with "busy, retry in N s"
    runner_queue_size: int = 32
    # --- scale-out (COURSE_RUNNER=celery; docs/operations.md#scaling-out)
    # Redis: Celery's broker, and the per-job event streams the web tier reads
    celery_broker_url: str = "redis://127.0.0.1:6379/0"
    # seconds a job's event stream (output lines, result, verdict) stays in Redis after its last event; a page
    # reconnecting within it replays from Last-Event-ID, later readers get the stored verdict
    runner_stream_ttl_s: int = 3600
    # seconds a running job's lease lasts without a heartbeat; workers renew theirs every third of it, and the
    # sweeper queues a job again once its lease ran out (its worker died)
    runner_lease_s: float = 30.0
    # runs of one submission (the first plus re-runs after a worker died) before it is stored as an error
    runner_max_attempts: int = 3
    # event streams (GET /api/submissions/{id}/events) one learner may hold open on one run, and on all runs, per
    # web process; a page needs one per run it shows, a second tab or a reconnect one more
    streams_per_submission: int = Field(default=3, ge=1)
    streams_per_learner: int = Field(default=8, ge=1)

    # --- sandbox limits, per job
    # seconds of wall clock; a tiny training step takes well under one
    sandbox_wall_s: float = 10.0
    # seconds of CPU time
    sandbox_cpu_s: int = 10
    # bytes of memory (cgroup limit where available, address-space rlimit otherwise)
    sandbox_memory_bytes: int = 1024 * MiB
    # processes and threads
    sandbox_pids: int = 64
    # bytes of stdout+stderr; a learner's program rarely prints more
    sandbox_output_bytes: int = 1 * MiB
    # bytes of source code accepted
    sandbox_source_bytes: int = 64 * KiB
    # bytes of private tmpfs per job (/tmp, /var/tmp, /dev/shm each)
    sandbox_tmpfs_bytes: int = 64 * MiB
    # pre-forked isolated children kept waiting for code
    sandbox_prefork: int = 2
    # the pre-forked children build the default machine's simulated host before their job comes (shorter jobs on
    # that machine), and one more child waits that builds nothing, for jobs on other machines
    sandbox_prepare_ahead: bool = True
    # first uid of the unprivileged per-slot users
    sandbox_uid_base: int = 64000
    # run code even where no isolation is possible; development only, and loudly logged
    sandbox_unsafe_dev: bool = False
    # how CPU jobs' children are made: "prefork" isolates each child at once and keeps it waiting; "spawn" runs
    # the GPU slots' way (warm up, then isolate, one job, then a fresh child), so that logic runs without a GPU
    sandbox_pool: Literal["prefork", "spawn"] = "prefork"
    # bytes of GPU memory a job's PyTorch allocator may take (0: no cap); a guardrail the learner's code can
    # undo, not a limit: MIG is the hard one (docs/security.md)
    sandbox_gpu_memory_bytes: int = 0
    # cores (fractions too) that all jobs together leave to the web server and the rest of the host: the parent
    # cgroup of the jobs gets cpu.max = (cores - this); 0: no cap (app/sandbox/cgroups.py)
    sandbox_cpu_reserve: float = Field(default=0.5, ge=0)
    # the parent cgroup of the jobs is an idle group (cpu.idle): a page request takes a core from a job at once; a
    # guard makes it a normal group for a second whenever jobs that want a core got almost none, as they do while the
    # rest of the host wants every core (app/sandbox/cgroups.py, _idle_jobs and feed_jobs)
    sandbox_jobs_idle: bool = True
    # tests only: the directory the GPU passthrough takes device nodes from; anything but /dev means "a test
    # tree of nodes made with mknod", whose nvidiaN nodes are the GPUs (no NVML)
    sandbox_gpu_dev_root: Path = Path("/dev")

    # --- GPUs
    # which GPUs (or MIG devices) jobs may be given, one slot each: unset = every one NVML reports (none on a CPU
    # host), "none", or a comma list of NVML indices ("0,2"), MIG devices ("0:1") or UUIDs (GPU-..., MIG-...)
    gpu_devices: str | None = None

    # --- simulated machines (where a job finds no GPU; app/harness/machine/machines/, one profile per machine)
    # the machine jobs believe they run on unless an exercise's `machine:` or `course run --machine` names one
    sim_machine: str = "h100"
    # a folder of more machine profiles (*.json, the shape of app/harness/machine/machines/); tests add throw-away ones
    sim_machines_dir: Path | None = None
    # bytes; a simulated GPU tensor this large keeps shape, dtype and memory but no values (a real card's
    # tensors do not fit the job's host memory)
    sim_dataless_tensor_bytes: int = Field(default=16 * MiB, ge=0)
    # bytes; once the simulated GPUs' tensors with values take this much host memory, new ones are kept without
    # values too (a sixteenth of the default job memory: their gradients and optimizer states take more)
    sim_device_data_bytes: int = Field(default=64 * MiB, ge=0)

    # --- LTI 1.3 (the course as a tool of an LMS; docs/authoring.md#connecting-an-lms)
    # seconds a platform's key set (its JWKS) is kept before a launch fetches it again; a launch signed with a key
    # id the kept set lacks fetches it at once (the platform rotated its keys)
    lti_jwks_cache_s: float = Field(default=300.0, ge=0)
    # seconds between two passes of the site's grade sender over the outbox (0: as soon as it can, for tests)
    lti_send_interval_s: float = Field(default=5.0, ge=0)
    # seconds before a grade the LMS refused or did not answer is sent again; doubled after each failure, up to
    # COURSE_LTI_RETRY_MAX_S, and never given up: the score waits in the outbox until the LMS takes it
    lti_retry_s: float = Field(default=30.0, ge=0)
    lti_retry_max_s: float = Field(default=3600.0, ge=0)
    # seconds one request to an LMS (keys, token, line items, scores, roster) may take
    lti_http_timeout_s: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def check_sim_machine(self) -> "Settings":
        """Refuse a COURSE_SIM_MACHINE no profile has (naming the machines there are) at start-up."""
        from app.harness.machine.machines import MachineError, get

        try:
            get(self.sim_machine, self.sim_machines_dir)
        except MachineError as exc:
            raise ValueError(f"COURSE_SIM_MACHINE / COURSE_SIM_MACHINES_DIR: {exc}") from None
        return self

    @field_validator("smtp_url")
    @classmethod
    def check_smtp_url(cls, value: str) -> str:
        """Refuse a COURSE_SMTP_URL that names no SMTP server, at start-up rather than at the first mail."""
        return check_smtp_url(value)

    @field_validator("solution_unlock")
    @classmethod
    def check_solution_unlock(cls, value: str) -> str:
        """Refuse a COURSE_SOLUTION_UNLOCK that is no unlock rule, at start-up."""
        return str(parse_unlock(value))

    @field_validator("trusted_proxies")
    @classmethod
    def check_trusted_proxies(cls, value: str) -> str:
        """Refuse a COURSE_TRUSTED_PROXIES entry that is no address or network, naming it."""
        return check_proxies(value)

    @model_validator(mode="after")
    def check_secret(self) -> "Settings":
        """Refuse to run outside development (production, test) with the shipped secret: it signs sessions."""
        if self.env != "development" and self.secret_key == DEFAULT_SECRET:
            raise ValueError(
                "COURSE_SECRET_KEY is the shipped development default; set it to a long random string "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`) before running with "
                f"COURSE_ENV={self.env}"
            )
        return self

    def site_url(self) -> str:
        """Return the site's public base URL without a trailing slash (links in mails and the CLI use it)."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")


def check_proxies(value: str) -> str:
    """Return a trusted-proxies list cleaned of spaces; ValueError naming an entry that is no address or network."""
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    return "*" if entries == ["*"] else ",".join(_proxy(entry) for entry in entries)


def _proxy(entry: str) -> str:
    try:
        # uvicorn compares by address object but parses a network strictly: 10.0.0.1/8 must be 10.0.0.0/8
        return str(ip_network(entry, strict=False)) if "/" in entry else str(ip_address(entry))
    except ValueError:
        raise ValueError(f"COURSE_TRUSTED_PROXIES: {entry!r} is not an IP address or network; give addresses or "
                         "networks separated by commas (10.0.0.2,10.1.0.0/16), \"*\" for any peer, or nothing to "
                         "trust no proxy") from None


@lru_cache
def get_settings() -> Settings:
    """Return the settings read from the environment (cached)."""
    return Settings()


def field_env_names() -> list[str]:
    """Return every environment variable the settings read, for the docs test."""
    return [f"COURSE_{name.upper()}" for name in Settings.model_fields]


__all__ = ["Settings", "get_settings", "field_env_names", "DEFAULT_SECRET"]
