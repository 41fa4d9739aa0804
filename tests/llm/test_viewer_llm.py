"""The viewer on a real LLM run (loopback test server, real client): every call shows its
prompt, answer, tokens, latency and cost, and the endpoint's key appears nowhere."""

from __future__ import annotations

import json

from mbb.batch.build import run_condition
from mbb.batch.viewer import build_viewer

from .conftest import SECRET
from .test_llm_condition import condition, key_in_env, llm_server  # noqa: F401 (fixtures)


def test_viewer_shows_each_llm_call_and_never_the_key(
    root,
    tmp_path,
    llm_server,  # noqa: F811
    key_in_env,  # noqa: F811
):
    cond = condition(root, llm_server, tmp_path)
    run_condition(cond, 0, tmp_path / "out" / "llm_test-seed0000")
    # its cache lies outside the folder viewed: read only when named (a colleague's log could
    # name a cache of yours), and the page says why prompts are missing
    res = build_viewer(tmp_path / "out")
    (warning,) = res.warnings
    assert "not shown: no cache inside the folder holds them" in warning[1]
    assert "mbb view --llm-cache FILE" in warning[1]
    res = build_viewer(tmp_path / "out", llm_caches=[tmp_path / "cache.sqlite"])
    assert res.runs == 1 and res.bad == [] and res.warnings == []
    viewer = res.index.parent
    text = (viewer / "data" / "runs" / "000000.js").read_text(encoding="utf-8")
    data = json.loads(text[len("MBB.run(0,") : -3])
    calls = [e for e in data["events"] if e["kind"] == "llm_call"]
    assert len(calls) == len(llm_server.completions) > 0
    for c in calls:
        assert c["prompt_tokens"] > 0 and c["cost_usd"] > 0 and "latency_s" in c
        shown = data["llm"][str(c["seq"])]
        assert shown["prompt"].startswith("[system]") and "[user]" in shown["prompt"]
        assert shown["answer"].strip()
    everything = "".join(p.read_text() for p in viewer.rglob("*") if p.is_file())
    assert SECRET not in everything
    assert str(tmp_path) not in json.dumps(data["events"][0])  # no cache path, no provenance
