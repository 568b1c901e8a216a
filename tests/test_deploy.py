"""The deployment files, checked offline (no Docker engine here): compose.yaml against the Compose
Specification's JSON schema (vendored, see tests/vendor/compose-spec/README.md), and what the worker tier needs
from it; the Dockerfile's two targets. hadolint itself runs in tests/test_packaging.py."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from app import ROOT

SCHEMA = json.loads((ROOT / "tests" / "vendor" / "compose-spec" / "compose_spec.json").read_text())


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def schema_errors(document: dict) -> list[str]:
    validator = jsonschema.Draft201909Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(document)]


def test_compose_yaml_is_valid_against_the_compose_specification(compose):
    assert schema_errors(compose) == []


def test_the_schema_check_has_teeth(compose):
    broken = json.loads(json.dumps(compose))
    broken["services"]["web"]["replicas"] = 2  # belongs under deploy:
    broken["services"]["redis"]["healthcheck"]["interval"] = 10  # a duration is a string
    assert len(schema_errors(broken)) == 2


def test_every_service_has_a_healthcheck_and_the_tier_is_complete(compose):
    services = compose["services"]
    assert {"web", "worker-cpu", "worker-gpu", "redis", "postgres"} <= set(services)
    for name, service in services.items():
        check = service.get("healthcheck", {})
        assert check.get("test") or (name == "migrate" and check.get("disable")), f"{name} has no healthcheck"
    assert services["web"]["deploy"]["replicas"] == 2
    devices = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and devices[0]["capabilities"] == ["gpu"]
    assert "--queues" in services["worker-gpu"]["command"] and "gpu" in services["worker-gpu"]["command"]


def test_every_process_shares_one_broker_and_one_database_and_runs_the_celery_runner(compose):
    for name in ("web", "migrate", "worker-cpu", "worker-gpu"):
        env = compose["services"][name]["environment"]
        assert env["COURSE_RUNNER"] == "celery" and env["COURSE_ENV"] == "production"
        assert env["COURSE_CELERY_BROKER_URL"] == "redis://:${REDIS_PASSWORD:?set REDIS_PASSWORD}@redis:6379/0"
        assert env["COURSE_DATABASE_URL"].startswith("postgresql+psycopg://")


def test_workers_get_exactly_the_privileges_the_sandbox_needs(compose):
    for name in ("worker-cpu", "worker-gpu"):
        worker = compose["services"][name]
        assert worker["user"] == "0" and worker["cap_add"] == ["SYS_ADMIN"]
        assert worker["security_opt"] == ["apparmor=unconfined"] and not worker.get("privileged")
    web = compose["services"]["web"]
    assert not {"cap_add", "security_opt", "privileged", "user"} & set(web)  # the image's uid 10001


def test_the_dockerfile_builds_a_web_and_a_worker_target():
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = [line.split()[-1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert stages == ["base", "worker", "web"]  # web last: a plain `docker build` makes the site
    web = dockerfile.split("FROM base AS web", 1)[1]
    worker = dockerfile.split("FROM base AS worker", 1)[1].split("FROM base AS web", 1)[0]
    assert "USER 10001" in web and "USER" not in worker.replace("COURSE_SANDBOX_UID_BASE", "")
    assert '"course", "worker"' in worker and "worker-entrypoint" in worker
    assert (ROOT / "scripts" / "worker-entrypoint").stat().st_mode & 0o111


def test_redis_has_a_password_and_no_published_port(compose):
    """Redis is the tier's trust root: whoever writes to it queues jobs with any limits or forges verdicts."""
    redis = compose["services"]["redis"]
    assert '--requirepass "$$REDIS_PASSWORD"' in redis["command"][-1] and "ports" not in redis
    assert redis["environment"]["REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?")
    assert redis["environment"]["REDISCLI_AUTH"] == redis["environment"]["REDIS_PASSWORD"]  # the healthcheck's
