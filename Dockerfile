# The course's images, the same install steps as `make setup`, in two targets of one build:
#   docker build -t course .                                   # the web site (the default target, `web`)
#   docker build -t course-worker --target worker .            # `course worker`, holding the sandbox
#   docker build -t course-gpu --build-arg TORCH_BUILD=cuda .  # the CUDA build of the same torch (either target)
#   docker run -p 8000:8000 -e COURSE_SECRET_KEY=... course
# compose.yaml runs both for the worker tier; the worker's privileges are explained in docs/operations.md.
# GPU slots need the sandbox to run as root with the GPUs' device nodes: docs/operations.md#gpu-hosts.
FROM python:3.11-slim-bookworm AS base

# Which torch build to install, as `make setup TORCH_BUILD=...`: cpu (PyTorch's CPU index) or cuda (PyPI, whose
# Linux wheel is the CUDA build). torch is pinned and installed first: an unpinned `torch` pulls the newest.
# TORCH_INDEX_URL, when set, replaces the build's index (e.g. https://download.pytorch.org/whl/cu128, with
# TORCH_SPEC="torch==2.13.0+cu128").
ARG TORCH_BUILD=cpu
ARG TORCH_SPEC="torch==2.13.0"
ARG TORCH_INDEX_URL=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/srv/course/.venv \
    PATH=/srv/course/.venv/bin:$PATH

# libseccomp: the sandbox's syscall filter; bubblewrap-style isolation needs nothing else from Debian.
# Debian package versions are not pinned: bookworm's security updates should flow in on every rebuild.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libseccomp2 \
 && rm -rf /var/lib/apt/lists/*

# The site runs as an unprivileged user; the sandbox drops learner code to its own uids (COURSE_SANDBOX_UID_BASE).
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin course

WORKDIR /srv/course

# pip itself is upgraded to the latest, as `make setup` does; scripts/torch-build fails the build when the
# installed torch is not the build asked for.
COPY scripts/torch-build ./scripts/
# hadolint ignore=DL3013
RUN case "$TORCH_BUILD" in \
      cpu) index="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" ;; \
      cuda) index="${TORCH_INDEX_URL:-https://pypi.org/simple}" ;; \
      *) echo "TORCH_BUILD must be cpu or cuda, not $TORCH_BUILD" >&2; exit 2 ;; \
    esac \
 && python -m venv "$VIRTUAL_ENV" \
 && pip install --upgrade pip \
 && pip install --index-url "$index" "$TORCH_SPEC" \
 && python scripts/torch-build "$TORCH_BUILD"

# Dependencies first (cached while only code and content change): the runtime's, each at its locked version and
# hash (`make lock` writes requirements/runtime.txt; the dev tools stay out of the image). Then the code, installed
# editable with nothing left to resolve, and the content.
COPY requirements/runtime.txt ./requirements/
RUN pip install --require-hashes -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-deps -e .

COPY alembic.ini ./
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
COPY lessons ./lessons
COPY exercises ./exercises

RUN mkdir -p var && chown course:course var

# Production mode refuses the development secret and broken content; set COURSE_SECRET_KEY when running.
ENV COURSE_ENV=production \
    COURSE_HOST=0.0.0.0 \
    COURSE_PORT=8000


# --- the worker: runs jobs from Redis in the warm sandbox (COURSE_RUNNER=celery on the web side).
# It stays root: the sandbox makes namespaces and mounts, writes cgroups and switches each job to its own uid
# (COURSE_SANDBOX_UID_BASE...), none of which uid 10001 may do. Learner code never runs as root: every job
# drops to its slot's uid with no capabilities, under seccomp. The container needs CAP_SYS_ADMIN and no
# AppArmor mount denial (compose.yaml: cap_add, security_opt, cgroup); the entrypoint gives the sandbox a
# writable cgroup v2 tree where the runtime mounted it read-only.
FROM base AS worker
COPY scripts/worker-entrypoint ./scripts/
# alive while its report in Redis is (renewed every third of COURSE_RUNNER_LEASE_S, gone when it stops)
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import os, socket, redis; r = redis.Redis.from_url(os.environ['COURSE_CELERY_BROKER_URL']); raise SystemExit(0 if any(r.scan_iter(match='course:worker:' + socket.gethostname() + ':*')) else 1)"]
ENTRYPOINT ["scripts/worker-entrypoint"]
CMD ["course", "worker", "--queues", "cpu"]


# --- the web site (the default target): unprivileged, no sandbox of its own with COURSE_RUNNER=celery.
FROM base AS web
USER 10001
EXPOSE 8000

# /readyz: 503 until the server is warm (its sandbox, a first graded job; docs/operations.md#ready-to-grade)
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]

CMD ["sh", "-c", "course db upgrade && exec course serve"]
