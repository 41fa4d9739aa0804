"""The study from one command: 3 models x 2 conditions x 2 seeds, each model behind a loopback
endpoint emulating another provider's quirks (OpenAI with prefix caching, Anthropic's
compatibility layer, llama.cpp with slots), through `mbb sweep --models`; the report groups the
spend by model with the cost per run. Also: `mbb run --model`, the refusal of an unknown model,
and a run folder that is never overwritten by another condition."""

from __future__ import annotations

import json
import re

import pytest

from mbb.analysis.compare import load_conditions, model_table
from mbb.cli import main
from mbb.core.eventlog import read_lines
from mbb.testing.emulate import ProviderEmulator
from mbb.testing.testserver import FakeOpenAIServer, declaring_responder

MODELS = {  # config name -> (provider emulated, model name sent, extra config)
    "gpt": ("openai", "gpt-4o-mini", {"tool_protocol": "native"}),
    "claude": ("anthropic", "claude-sonnet", {"tool_protocol": "json_action"}),
    "qwen": ("llamacpp", "qwen-local", {"slots": 3}),
}
PRICES = {
    "gpt-4o-mini": {"prompt": 0.15, "completion": 0.6, "cached_prompt": 0.075},
    "claude-sonnet": {"prompt": 3.0, "completion": 15.0},
    "qwen-local": {"prompt": 0.0, "completion": 0.0},
}


@pytest.fixture
def endpoints():
    emulators = {k: ProviderEmulator(p, declaring_responder) for k, (p, _, _) in MODELS.items()}
    servers = {k: FakeOpenAIServer(emulators[k], models=(MODELS[k][1],)).start() for k in MODELS}
    yield emulators, servers
    for s in servers.values():
        s.stop()


def _params(tmp_path, root, servers) -> list:
    models = "\n".join(
        f"  {k}:\n    model: {name}\n    preset: {provider}\n    base_url: {servers[k].url}\n"
        f"    api_key_env: null\n    timeout_s: 10\n    max_retries: 1\n"
        + "".join(f"    {a}: {b}\n" for a, b in extra.items())
        for k, (provider, name, extra) in MODELS.items()
    )
    prices = "\n".join(f"  {n}: {json.dumps(p)}" for n, p in PRICES.items())
    cache = tmp_path / "cache.sqlite"
    files = []
    for name, extra in [("study_a", ""), ("study_b", "memory: {enabled: false}\n")]:
        p = tmp_path / f"{name}.yaml"
        p.write_text(
            f"extends: {root / 'params' / 'llm_negotiators.yaml'}\nname: {name}\nsubruns: 1\n"
            f"workers: {{count: 3, model: gpt}}\nnegotiation: {{max_turns: 1}}\n{extra}"
            f"llm: {{cache: read_write, cache_file: {cache}}}\n"
            f"models:\n{models}\nprices:\n{prices}\n"
        )
        files.append(p)
    return files


@pytest.mark.notebook
def test_three_models_two_conditions_two_seeds_from_one_command(tmp_path, root, endpoints):
    emulators, servers = endpoints
    files = _params(tmp_path, root, servers)
    out = tmp_path / "study"
    argv = ["sweep", *map(str, files), "--seeds", "0..1", "--models", "gpt,claude,qwen"]
    rc = main([*argv, "--out", str(out), "--quiet", "--workers", "2"])
    assert rc == 0
    results = json.loads((out / "sweep.json").read_text())["results"]
    assert sorted(r["condition"] for r in results) == sorted(
        f"{c}[{m}]" for c in ("study_a", "study_b") for m in MODELS
    )
    assert {r["status"] for r in results} == {"ok"}
    for cond in ("study_a", "study_b"):
        for m in MODELS:
            dirs = sorted(p.parent.name for p in (out / f"{cond}-{m}").glob("*/events.jsonl"))
            assert dirs == [f"{cond}-{m}-seed0000", f"{cond}-{m}-seed0001"]
    # every endpoint was used, and none refused a request: each preset's quirks were handled
    for k, emulator in emulators.items():
        assert servers[k].completions, k
        assert emulator.rejected == [], (k, emulator.rejected[:2])
    bodies = {k: [r.body for r in s.completions] for k, s in servers.items()}
    assert all(b.get("prompt_cache_key", "").startswith("mbb-W") for b in bodies["gpt"])
    assert all("max_completion_tokens" in b and "max_tokens" not in b for b in bodies["gpt"])
    assert sum("tools" in b for b in bodies["gpt"]) > len(bodies["gpt"]) / 2  # native tools
    assert all(b["cache_prompt"] is True and b["id_slot"] in (0, 1, 2) for b in bodies["qwen"])
    assert all("response_format" not in b for b in bodies["claude"])  # prompt-only: ignored there
    for m in MODELS:  # every protocol works: the stand-in's answers are used, rarely defaulted
        lines = [x for p in out.glob(f"*-{m}/*/events.jsonl") for x in read_lines(p)]
        events = [json.loads(x) for x in lines]
        asked = sum(1 for e in events if e["kind"] == "llm_call" and e["role"] == "negotiator")
        defaulted = sum(
            1 for e in events if e["kind"] == "invalid_action" and e["rule"] == "default"
        )
        assert asked > 0 and defaulted < 0.2 * asked, (m, defaulted, asked)
    # the sweep's viewer shows prompts from the cache its own params name (outside the
    # sweep's folder, so read because the sweep names it, not because a log does)
    viewer_runs = "".join(p.read_text() for p in (out / "viewer" / "data" / "runs").glob("*.js"))
    assert (
        '"prompt":"[system]' in viewer_runs
        and "no cache inside the folder" not in (out / "viewer" / "data" / "index.js").read_text()
    )
    # the report groups the spend by model, with the cost per run
    index = (out / "index.html").read_text()
    table = index.split("<h2>LLM spend by model</h2>", 1)[1]
    rows = re.findall(r"<tr><td class=l>([^<]+)</td><td class=l>([^<]+)</td>(.*?)</tr>", table)
    assert [r[0] for r in rows] == ["claude-sonnet", "gpt-4o-mini", "qwen-local"]
    cells = {r[0]: re.findall(r"<td>([^<]*)</td>", r[2]) for r in rows}
    for model, c in cells.items():
        assert c[0] == "4", (model, c)  # runs: 2 conditions x 2 seeds
        assert c[-1].startswith("$")
    assert float(cells["claude-sonnet"][-1][1:]) > float(cells["gpt-4o-mini"][-1][1:]) > 0
    assert cells["qwen-local"][-1] == "$0.0000"
    assert float(cells["gpt-4o-mini"][3].rstrip("%")) > 0  # cached prompt share recorded
    # compare: condition x model outcomes and spend
    tables = load_conditions([out / f"study_a-{m}" for m in MODELS])
    t = model_table(tables)
    assert t.height == 3 and set(t["runs"]) == {2}
    assert sorted(t["model"]) == ["claude-sonnet", "gpt-4o-mini", "qwen-local"]
    cost = dict(zip(t["model"], t["cost_per_run_usd"], strict=True))
    assert cost["claude-sonnet"] > cost["gpt-4o-mini"] > cost["qwen-local"] == 0


def test_run_model_option_and_refusals(tmp_path, root, endpoints, capsys):
    _, servers = endpoints
    files = _params(tmp_path, root, servers)
    out = tmp_path / "runs"
    assert main(["run", str(files[0]), "--model", "nope", "--out", str(out), "--quiet"]) == 2
    assert "configured models: claude, gpt, hosted, local, qwen" in capsys.readouterr().err
    rc = main(["run", str(files[0]), "--model", "qwen", "--out", str(out), "--quiet"])
    assert rc == 0 and (out / "study_a-qwen-seed0000" / "events.jsonl").is_file()
    assert servers["qwen"].completions and not servers["gpt"].completions
    # the same condition name with other parameters into the same folder: refused, kept
    before = (out / "study_a-qwen-seed0000" / "events.jsonl").read_bytes()
    argv = ["run", str(files[0]), "--model", "qwen", "--out", str(out), "--quiet"]
    assert main([*argv, "--set", "budget.credits=5"]) == 2
    assert "a folder never mixes conditions" in capsys.readouterr().err
    assert (out / "study_a-qwen-seed0000" / "events.jsonl").read_bytes() == before
    # a scripted condition has no model to choose
    assert main(["run", "base", "--model", "gpt", "--out", str(out), "--quiet"]) == 2


def test_the_same_run_against_the_model_served_elsewhere_is_not_foreign(tmp_path, root):
    from mbb.batch.build import load_params
    from mbb.batch.runs import ForeignRunError, check_not_foreign

    def cond(url, **extra):
        model = {"model": "m", "base_url": url, "api_key_env": None, **extra}
        over = {"workers": {"model": "x"}, "models": {"x": model}}
        return load_params(root / "params" / "llm_negotiators.yaml", over)

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    started = {
        "kind": "run_started",
        "params": cond("http://127.0.0.1:1/v1").model_dump(mode="json"),
    }
    (run_dir / "events.jsonl").write_text(json.dumps(started) + "\n")
    check_not_foreign(run_dir, cond("http://127.0.0.1:2/v1", timeout_s=9))  # transport only
    with pytest.raises(ForeignRunError, match="differing: models"):
        check_not_foreign(run_dir, cond("http://127.0.0.1:2/v1", temperature=0.1))
