"""The in-memory event buffer behind the SSE stream: every subscriber, early or late, gets every event in order."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.submissions import LiveRun, Refused, check_code


async def collect(run: LiveRun) -> list[tuple[str, dict]]:
    return [event async for event in run.replay()]


def test_early_and_late_subscribers_get_every_event_in_order():
    async def scenario():
        run = LiveRun()
        early = asyncio.create_task(collect(run))
        await asyncio.sleep(0)
        for i in range(5):
            run.push("output", {"stream": "stdout", "line": str(i)})
            await asyncio.sleep(0)
        late = asyncio.create_task(collect(run))
        await asyncio.sleep(0)
        run.push("output", {"stream": "stdout", "line": "5"})
        run.push("verdict", {"status": "passed"})
        run.close()
        after = await collect(run)  # subscribes after the end: a full replay, then stops
        return await early, await late, after

    # a thread of its own: Playwright's sync API (browser tests) may hold an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        early, late, after = pool.submit(asyncio.run, asyncio.wait_for(scenario(), 5)).result()
    expected = [("output", {"stream": "stdout", "line": str(i)}) for i in range(6)]
    expected += [("verdict", {"status": "passed"})]
    assert early == late == after == expected


@pytest.mark.parametrize("code, status", [("x" * 65537, 413), ("x = '\ud800'", 400)])
def test_refusals_name_the_problem(code, status):
    with pytest.raises(Refused) as refused:
        check_code(code, source_bytes=65536)
    assert refused.value.status_code == status
    assert ("limit is 64 KiB" if status == 413 else "not valid UTF-8") in refused.value.message


def test_code_at_the_limit_is_accepted():
    check_code("é" * 32768, source_bytes=65536)  # 65536 bytes of UTF-8, exactly the limit
