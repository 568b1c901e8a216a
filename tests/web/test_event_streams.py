"""Event streams through the front door, on a real server: a learner holds a few open per run and a few more in
all (the next one is 429 with a sentence), and a Last-Event-ID that is no position (Unicode digits, thousands of
digits) replays the whole run as if absent, never a stream broken after its 200."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from app.main import create_app
from app.runner.batches import parse_position
from app.runner.redis_streams import event_id, resume_point, valid_id
from tests.helpers import LiveServer, make_settings, parse_sse
from tests.support.clients import Learner

# long enough to hold its streams open while the test opens more; far inside the sandbox's wall limit
SLOW = "import time\nprint('started', flush=True)\ntime.sleep(4)\n"
QUICK = "print('one')\nprint('two')\n"
# seconds; a bound for the whole scenario, never a measurement
BOUND_S = 120


def serve(tmp_path, **extra):
    settings = make_settings(tmp_path, migrate=True, runner_concurrency=2, **extra)
    return create_app(settings)


async def submit(learner: Learner, code: str) -> str:
    response = await learner.request("POST", "/api/exercises/pick-device/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    return response.json()["id"]


async def open_stream(stack: AsyncExitStack, learner: Learner, submission_id: str):
    return await stack.enter_async_context(learner.client.stream("GET", f"/api/submissions/{submission_id}/events"))


def test_event_streams_are_capped_per_learner_on_one_run_and_in_all(tmp_path):
    app = serve(tmp_path, streams_per_submission=2, streams_per_learner=3)

    async def scenario(url):
        async with Learner(url) as learner, Learner(url) as other, AsyncExitStack() as stack:
            first, second = await submit(learner, SLOW), await submit(learner, SLOW)
            held = [await open_stream(stack, learner, first) for _ in range(2)]
            assert [r.status_code for r in held] == [200, 200]
            refused = await learner.request("GET", f"/api/submissions/{first}/events")
            assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
            assert refused.json()["detail"] == ("Too many open streams: 2 event streams of this run are open "
                                                "already (in other tabs or windows). Close one of them, then "
                                                "reload this page.")
            assert (await open_stream(stack, learner, second)).status_code == 200
            overall = await learner.request("GET", f"/api/submissions/{second}/events")
            assert overall.status_code == 429 and "3 event streams of your runs" in overall.json()["detail"]
            mine = await submit(other, QUICK)  # another learner's streams are theirs: nothing of the first's counts
            assert (await other.request("GET", f"/api/submissions/{mine}/events")).status_code == 200
            await held[0].aclose()  # a stream closed gives its slot back
            await asyncio.sleep(0.3)
            again = await learner.request("GET", f"/api/submissions/{second}/events")
            assert again.status_code == 200 and parse_sse(again.text)[-1][0] == "verdict"

    with LiveServer(app) as server:
        asyncio.run(asyncio.wait_for(scenario(server.url), BOUND_S))
    app.state.db.dispose()


def test_a_malformed_last_event_id_replays_the_run_as_if_absent(tmp_path):
    app = serve(tmp_path)

    async def scenario(url):
        async with Learner(url) as learner:
            submission_id = await submit(learner, QUICK)
            whole = await learner.request("GET", f"/api/submissions/{submission_id}/events")
            assert parse_sse(whole.text)[-1][0] == "verdict"
            for malformed in ("\xb2:0", "0:\u0663", "1" * 5000 + ":0", "-1:0", "1:0:0", "\xb2-0"):
                response = await learner.request("GET", f"/api/submissions/{submission_id}/events",
                                                 headers={"Last-Event-ID": malformed.encode("latin-1", "replace")})
                assert response.status_code == 200, malformed
                assert parse_sse(response.text) == parse_sse(whole.text), malformed

    with LiveServer(app) as server:
        asyncio.run(asyncio.wait_for(scenario(server.url), BOUND_S))
    app.state.db.dispose()


def test_event_ids_are_ascii_digits_only():
    assert parse_position("120:3") == (120, 3) and valid_id("1700000000000-4") == "1700000000000-4"
    for malformed in ("\xb2:0", "0:\u0663", "1" * 5000 + ":0", "", None, "1:", ":1", "+1:0"):
        assert parse_position(malformed) is None, malformed
    for malformed in ("\xb2-0", "0-\u0663", "1" * 5000 + "-0", "", None, "1-", "1-0-0"):
        assert valid_id(malformed) is None, malformed


def test_tier_event_ids_carry_the_position_of_output_and_parse_back():
    assert event_id("1700-3", (120, 3)) == "1700-3/120:3" and event_id("1700-4", None) == "1700-4"
    assert resume_point("1700-3/120:3") == ("1700-3", (120, 3)) and resume_point("1700-4") == ("1700-4", None)
    for malformed in ("1700-3/\xb2:0", "1700-3/1:", "\xb2-0", "stored-2", "verdict", "", None):
        assert resume_point(malformed) is None, malformed
