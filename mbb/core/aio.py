"""Running a coroutine to its end from any caller: a script, a process-pool worker, or a Jupyter
kernel whose event loop is already running (then in a helper thread), with Ctrl-C handled so
that neither a half-built loop nor a never-started coroutine is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

__all__ = ["run_coroutine", "sigint_deferred"]


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Ctrl-C noted, not raised, inside the block, then acted on as the handler in place would
    have (main thread only; elsewhere a no-op: Python runs handlers in the main thread). For
    steps a KeyboardInterrupt must not cut in two: closing an event loop, starting worker
    processes. Blocking the signal with `pthread_sigmask` is not enough there: the kernel can
    hand it to another thread, and Python still runs the handler in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda *_: noted.append(1))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    if noted and callable(previous):
        previous(signal.SIGINT, None)  # Python's default raises KeyboardInterrupt
    elif noted and previous != signal.SIG_IGN:
        raise KeyboardInterrupt


def _new_loop_deferring_sigint() -> asyncio.AbstractEventLoop:
    """An event loop built with SIGINT held back (main thread only): a Ctrl-C that lands inside
    the loop's constructor leaves a half-built loop whose finaliser prints a traceback. The
    signal is delivered as soon as the loop exists, and the runner handles it from there."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.new_event_loop()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        loop = asyncio.new_event_loop()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a held Ctrl-C is raised about here
        return loop
    except BaseException:
        loop.close()
        raise


def _run_to_end(factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the coroutine `factory` makes on a fresh loop, closed whatever happens (a Ctrl-C
    included: asyncio.Runner cancels the task, a coroutine never started is closed, and the
    loop's own shutdown is not cut short, so neither a loop nor a coroutine is left for the
    garbage collector to complain about)."""
    runner = asyncio.Runner(loop_factory=_new_loop_deferring_sigint)
    try:
        coro = None
        try:
            coro = factory()
            runner.run(coro)
        except BaseException:
            if coro is not None:
                coro.close()
            raise
    finally:
        # a Ctrl-C inside close() would leave its shutdown coroutines never awaited (a
        # RuntimeWarning printed at exit): the loop is closed first, the Ctrl-C acted on after
        with sigint_deferred():
            runner.close()


def run_coroutine(factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the coroutine `factory` makes to its end, also from inside a running loop (a Jupyter
    kernel): then in a helper thread. factory: makes the coroutine (called once)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _run_to_end(factory)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(_run_to_end, factory).result()
