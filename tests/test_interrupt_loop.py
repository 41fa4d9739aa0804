"""A Ctrl-C that lands while a run's event loop is being built or before its coroutine starts
leaves nothing for the garbage collector to complain about on stderr (the flaky one-line
Ctrl-C test caught a half-built loop's traceback under load)."""

import asyncio
import gc
import signal
import warnings

import pytest

from mbb.core import aio as arena


def test_ctrl_c_inside_the_loop_constructor_is_raised_once_the_loop_exists(monkeypatch):
    built = []
    real = asyncio.new_event_loop

    def interrupted_while_building():
        signal.raise_signal(signal.SIGINT)  # held back by the mask until the loop exists
        loop = real()
        built.append(loop)
        return loop

    monkeypatch.setattr(asyncio, "new_event_loop", interrupted_while_building)
    started = []

    async def work() -> None:
        started.append(True)

    gc.collect()  # loops other tests left behind are not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            arena.run_coroutine(work)
        gc.collect()
    assert built and built[0].is_closed()  # fully built, then closed
    assert not started
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert not [w for w in caught if "unclosed event loop" in str(w.message)]


def test_a_run_still_returns_normally():
    out = []

    async def work() -> None:
        await asyncio.sleep(0)
        out.append(1)

    arena.run_coroutine(work)
    assert out == [1]


def test_a_ctrl_c_inside_a_deferred_block_is_raised_after_it():
    """`sigint_deferred`: the block runs to its end (an event loop's close, worker start-up),
    then the Ctrl-C is raised."""
    import os
    import signal

    from mbb.core.aio import sigint_deferred

    finished = False
    with pytest.raises(KeyboardInterrupt), sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs at the next bytecode boundaries
            pass
        finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupted_gathered_phase_records_none_of_its_events():
    """Ctrl-C cancels a phase whose calls run concurrently: the calls that had finished are
    not logged (a resumed run answers them from the cache and logs the whole phase in worker
    order, which a half-logged phase would contradict). A phase that completes logs its
    events in worker order, whatever order its calls finished in."""
    from types import SimpleNamespace

    from mbb.core.eventlog import EventLog
    from mbb.core.events import Requested
    from mbb.protocol.context import RunContext

    def context() -> RunContext:
        ctx = RunContext.__new__(RunContext)  # only what `phase` reads
        ctx.log = EventLog("x-seed0000")
        concurrent = SimpleNamespace(negotiator=SimpleNamespace(concurrent=True))
        ctx.workers = {"W1": concurrent, "W2": concurrent}
        return ctx

    async def interrupted() -> RunContext:
        ctx, w1_done = context(), asyncio.Event()

        async def call(w: str) -> int:
            if w == "W1":
                ctx.log.emit(Requested, "W1", duration=30)
                w1_done.set()
                return 1
            await asyncio.Event().wait()  # W2 never answers
            return 2

        task = asyncio.create_task(ctx.phase(["W1", "W2"], call))
        await w1_done.wait()
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return ctx

    assert asyncio.run(interrupted()).log.lines == []

    async def completed() -> RunContext:
        ctx = context()

        async def call(w: str) -> int:
            if w == "W1":
                await asyncio.sleep(0.01)  # W2 finishes first
            ctx.log.emit(Requested, w, duration=30)
            return 1

        await ctx.phase(["W1", "W2"], call)
        return ctx

    lines = asyncio.run(completed()).log.lines
    assert ['"worker":"W1"' in lines[0], '"worker":"W2"' in lines[1]] == [True, True]
