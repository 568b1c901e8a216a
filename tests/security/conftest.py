"""One warm sandbox per pool for every hostile program; the app's secret is in this process's environment on purpose.

Every hostile program runs twice: against the default pool (children isolate first, then wait) and against the
spawn-then-isolate pool that GPU slots use, in its CPU mode (children warm up first, then isolate)."""

from __future__ import annotations

import os
import secrets

import pytest

from app.runner import BlockingRunner
from tests.helpers import make_settings


@pytest.fixture(scope="session", params=["prefork", "spawn"])
def sandbox(request, tmp_path_factory):
    """A started runner (fork server) shared by the security tests; `.secret` is the app's secret key."""
    secret = "sbx-secret-" + secrets.token_hex(12)
    old = os.environ.get("COURSE_SECRET_KEY")
    os.environ["COURSE_SECRET_KEY"] = secret  # what a real app process holds; the sandbox must never see it
    settings = make_settings(tmp_path_factory.mktemp("security"), secret_key=secret, sandbox_prefork=1,
                             sandbox_pool=request.param)
    try:
        with BlockingRunner(settings) as runner:
            runner.secret = secret
            yield runner
    finally:
        if old is None:
            os.environ.pop("COURSE_SECRET_KEY", None)
        else:
            os.environ["COURSE_SECRET_KEY"] = old


@pytest.fixture(autouse=True)
def still_serves(sandbox):
    """After each hostile program, the same fork server must run an ordinary job correctly."""
    server = sandbox.runner.server_pid
    yield
    result = sandbox.run_code("print('still serving')")
    assert (result.status, result.stdout) == ("ok", "still serving\n"), result
    assert sandbox.runner.server_pid == server and sandbox.runner.restarts == 0
