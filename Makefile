# One command to serve, one to test. Both build everything they need on a fresh machine.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
HOST    ?= 127.0.0.1
PORT    ?= 8000
# torch is installed first and pinned: the CPU wheel lies on local disk; an unpinned torch pulls a CUDA build.
TORCH   ?= torch==2.13.0
# Which build of that torch: cpu (the default) or cuda, for a GPU host (it needs the NVIDIA driver, no toolkit).
# PyPI's Linux wheel of a torch version is its CUDA build. pip runs --isolated for it, without the user's pip
# configuration and PIP_* variables, where a local wheelhouse may offer 2.13.0+cpu, which sorts above 2.13.0.
TORCH_BUILD ?= cpu
TORCH_INDEX_cuda ?= https://pypi.org/simple
TORCH_PIP_cpu :=
TORCH_PIP_cuda = --isolated --index-url $(TORCH_INDEX_cuda)
STAMP   := $(VENV)/.installed-$(TORCH_BUILD)
# Every other Python dependency comes from a lock, pinned with its hashes (pip --require-hashes holds):
# requirements/dev.txt, the runtime and the dev extra, is what setup installs; requirements/runtime.txt, the runtime
# alone at the same versions, is what the Dockerfile installs. torch's own requirements are locked too
# (requirements/torch.in), torch itself never: no resolver sees it. `make lock` writes both with uv, which resolves
# from PyPI alone for CPython 3.11 on Linux and reads no pip configuration (this machine's cap on torch and local
# indexes), so a lock made on any machine is the same. It keeps every pin it can: `make lock LOCK_ARGS=--upgrade`,
# or LOCK_ARGS="--upgrade-package NAME", moves them.
LOCK    := requirements/dev.txt
LOCK_RUNTIME := requirements/runtime.txt
UV      ?= uv==0.13.9
LOCK_VENV := .venv-lock
UV_COMPILE = $(LOCK_VENV)/bin/uv pip compile --quiet --no-config --generate-hashes --no-strip-markers \
	--python-version 3.11 --python-platform linux --custom-compile-command "make lock" \
	--overrides requirements/overrides.txt $(LOCK_ARGS)

.PHONY: serve test bench setup lock db system-deps editor figures clean

serve: setup db
	$(BIN)/course serve --host $(HOST) --port $(PORT)

# The linter first: it takes a second, the suite minutes. Everything runs; while editing, a quicker loop is
# `make test PYTEST_ARGS='-m "not slow and not browser"'` or `.venv/bin/python -m pytest tests/<area>`.
# It ends with the 30 slowest tests, to keep the suite inside its time (25 minutes on a 2-core machine).
# Two pytest-xdist processes (TEST_WORKERS=0 runs in this one): much of the suite waits on subprocesses, sockets
# and sleeps rather than on the cores. --dist loadfile keeps each test file on one process, so a module's shared
# servers (a tier, a live site, Chromium) start once, as in a serial run, and its tests keep their order.
TEST_WORKERS ?= 2
test: setup system-deps db
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=30 $(PYTEST_ARGS)

bench: setup system-deps db
	$(BIN)/python -m bench

setup: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	@case "$(TORCH_BUILD)" in cpu|cuda) ;; *) echo "TORCH_BUILD must be cpu or cuda, not $(TORCH_BUILD)"; exit 2;; esac
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/python scripts/torch-build $(TORCH_BUILD) 2>/dev/null || $(BIN)/pip uninstall --quiet --yes torch
	$(BIN)/pip install --quiet $(TORCH_PIP_$(TORCH_BUILD)) "$(TORCH)"
	$(BIN)/python scripts/torch-build $(TORCH_BUILD)
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed $(VENV)/.installed-*
	touch $(STAMP)

# Re-resolve the locks after pyproject.toml or requirements/torch.in changed (needs PyPI; setup does not run it).
lock:
	test -e $(LOCK_VENV)/.$(UV) || { rm -rf $(LOCK_VENV) && $(PY) -m venv $(LOCK_VENV) && \
	  $(LOCK_VENV)/bin/pip install --quiet "$(UV)" && touch $(LOCK_VENV)/.$(UV); }
	$(UV_COMPILE) pyproject.toml --extra dev requirements/torch.in -o $(LOCK)
	$(UV_COMPILE) pyproject.toml requirements/torch.in --constraints $(LOCK) -o $(LOCK_RUNTIME)

db: setup
	$(BIN)/course db upgrade

# What the tests need from Debian: Chromium for browser tests, libseccomp for the sandbox filter, redis-server and
# postgresql for the worker-tier and PostgreSQL tests (which start their own servers; the packages' own services
# are not used), faketime for the worker whose clock is a minute behind. `make bench` needs redis and postgresql
# as well (the celery benchmark).
system-deps:
	@command -v chromium >/dev/null 2>&1 && test -e /usr/lib/x86_64-linux-gnu/libseccomp.so.2 && \
	  test -x /usr/bin/redis-server && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && \
	  test -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium libseccomp2 \
	   redis-server postgresql faketime >/dev/null)

# Rebuild the bundled CodeMirror editor into static/ (needs npm; the bundle is committed).
editor:
	cd static/editor-src && npm ci --no-audit --no-fund && npm run build

# Redraw the lessons' SVG figures in static/figures/ from their script (the SVGs are committed).
figures: setup
	$(BIN)/python static/figures-src/figures.py

clean:
	rm -rf $(VENV) $(LOCK_VENV) var/*.db
