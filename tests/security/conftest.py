"""One warm sandbox for every hostile program; the app's secret is in this process's environment on purpose."""

from __future__ import annotations

import os
import secrets

import pytest

from app.runner import BlockingRunner
from tests.helpers import make_settings


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory):
    """A started runner (fork server) shared by the security tests; `.secret` is the app's secret key."""
    secret = "sbx-secret-" + secrets.token_hex(12)
    old = os.environ.get("COURSE_SECRET_KEY")
    os.environ["COURSE_SECRET_KEY"] = secret  # what a real app process holds; the sandbox must never see it
    settings = make_settings(tmp_path_factory.mktemp("security"), secret_key=secret, sandbox_prefork=1)
    try:
        with BlockingRunner(settings) as runner:
            runner.secret = secret
            yield runner
    finally:
        if old is None:
            os.environ.pop("COURSE_SECRET_KEY", None)
        else:
            os.environ["COURSE_SECRET_KEY"] = old
