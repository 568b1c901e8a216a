# The course site (and later the worker): one image, the same install steps as `make setup`.
#   docker build -t course .                                   # CPU torch (the default)
#   docker build -t course-gpu --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .
#   docker run -p 8000:8000 -e COURSE_SECRET_KEY=... course
FROM python:3.11-slim-bookworm

# Which torch build to install. torch is pinned and installed first, exactly as the Makefile does: an unpinned
# `torch` from PyPI pulls a multi-GB CUDA build. The index selects the build (cpu, cu128, rocm6.4, ...).
ARG TORCH_SPEC="torch==2.13.0"
ARG TORCH_INDEX_URL="https://download.pytorch.org/whl/cpu"

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

# pip itself is upgraded to the latest, as `make setup` does.
# hadolint ignore=DL3013
RUN python -m venv "$VIRTUAL_ENV" \
 && pip install --upgrade pip \
 && pip install --index-url "$TORCH_INDEX_URL" "$TORCH_SPEC"

# Dependencies first (cached while only content changes), then the code and the content.
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install -e .

COPY alembic.ini ./
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
COPY lessons ./lessons
COPY exercises ./exercises

RUN mkdir -p var && chown course:course var
USER 10001

# Production mode refuses the development secret and broken content; set COURSE_SECRET_KEY when running.
ENV COURSE_ENV=production \
    COURSE_HOST=0.0.0.0 \
    COURSE_PORT=8000
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

CMD ["sh", "-c", "course db upgrade && exec course serve"]
