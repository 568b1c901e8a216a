"""The in-memory event buffer behind the SSE stream: every subscriber, early or late, gets every event in order,
and output lines travel in batches (app/runner/batches.py)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.runner import batches
from app.submissions.live import LiveRun, Refused, check_code, sse_events


async def collect(run: LiveRun) -> list[tuple]:
    return list(sse_events([event async for event in run.replay()], None))


def in_a_loop(coro):
    # a thread of its own: Playwright's sync API (browser tests) may hold an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, asyncio.wait_for(coro, 5)).result()


def test_early_and_late_subscribers_get_every_event_in_order():
    async def scenario():
        run = LiveRun()
        early = asyncio.create_task(collect(run))
        await asyncio.sleep(0)
        for i in range(5):
            run.add_line("stdout", str(i))
        await asyncio.sleep(batches.BATCH_S * 2)  # the first batch goes out by itself
        late = asyncio.create_task(collect(run))
        await asyncio.sleep(0)
        run.add_line("stderr", "5")
        run.finish({"status": "passed"})
        after = await collect(run)  # subscribes after the end: a full replay, then stops
        return await early, await late, after

    early, late, after = in_a_loop(scenario())
    lines = [{"stream": "stdout", "line": str(i)} for i in range(5)]
    assert early == late == after == [("5:0", "output", {"lines": lines}),
                                      ("5:1", "output", {"lines": [{"stream": "stderr", "line": "5"}]}),
                                      ("verdict", "verdict", {"status": "passed"})]


def test_a_flood_is_capped_and_its_tail_kept():
    batcher = batches.OutputBatcher()
    sent = [b for i in range(10_000) if (b := batcher.add("stdout", f"spam {i}")) is not None]
    sent += batcher.close()
    lines = [line for b in sent for line in b.data()["lines"]]
    assert len(lines) == batches.LIVE_LINES + batches.TAIL_LINES
    assert sum(b.skipped for b in sent) == 10_000 - len(lines)
    assert lines[-1] == {"stream": "stdout", "line": "spam 9999"} and sent[-1].id == "10000:0"
    assert len(sent) <= batches.LIVE_LINES // 500 + 2


def test_a_page_that_reconnects_gets_only_the_lines_after_its_position():
    stored = batches.stored_batches("a\nb\nc\n", "oops\n")
    rest = [b.after((2, 0)) for b in stored]
    assert [line for b in rest if b for line in b.data()["lines"]] == [
        {"stream": "stdout", "line": "c"}, {"stream": "stderr", "line": "oops"}]
    assert batches.parse_position("3:1") == (3, 1) and batches.parse_position("7") is None


@pytest.mark.parametrize("code, status", [("x" * 65537, 413), ("x = '\ud800'", 400)])
def test_refusals_name_the_problem(code, status):
    with pytest.raises(Refused) as refused:
        check_code(code, source_bytes=65536)
    assert refused.value.status_code == status
    assert ("limit is 64 KiB" if status == 413 else "not valid UTF-8") in refused.value.message


def test_code_at_the_limit_is_accepted():
    check_code("é" * 32768, source_bytes=65536)  # 65536 bytes of UTF-8, exactly the limit
