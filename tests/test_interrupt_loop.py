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
