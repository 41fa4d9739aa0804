"""`mbb view`: the data export, and every kind of bad input (the rest is still shown)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.batch.viewer import build_viewer, find_runs, read_run, redact
from mbb.cli import main
from mbb.llm.cache import LlmCache


def _small_sweep(out: Path) -> Path:
    for name in ("base", "memory_off"):
        cond = load_params(name, {"subruns": 2})
        run_many(cond, runs=2, out_dir=out / name, processes=1).check()
    return out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    return _small_sweep(tmp_path_factory.mktemp("viewer_sweep"))


@pytest.fixture
def sweep_copy(sweep, tmp_path) -> Path:
    dst = tmp_path / "sweep"
    shutil.copytree(sweep, dst)
    return dst


def _index(viewer: Path) -> dict:
    text = (viewer / "data" / "index.js").read_text(encoding="utf-8")
    assert text.startswith("MBB.index(") and text.endswith(");\n")
    return json.loads(text[len("MBB.index(") : -3])


def _run_data(viewer: Path, entry: dict) -> dict:
    text = (viewer / entry["file"]).read_text(encoding="utf-8")
    prefix = f"MBB.run({entry['n']},"
    assert text.startswith(prefix) and text.endswith(");\n")
    return json.loads(text[len(prefix) : -3])


def _entry(index: dict, path_end: str) -> dict:
    (entry,) = [r for r in index["runs"] if r["path"].endswith(path_end)]
    return entry


def test_export_one_index_line_and_one_data_file_per_run(sweep_copy) -> None:
    res = build_viewer(sweep_copy)
    viewer = sweep_copy / "viewer"
    assert res.index == viewer / "index.html" and res.runs == 4 and res.bad == []
    assert res.warnings == []
    index = _index(viewer)
    assert index["root"] == "sweep" and index["message"] is None
    assert [r["condition"] for r in index["runs"]] == ["base"] * 2 + ["memory_off"] * 2
    page = res.index.read_text(encoding="utf-8")
    assert "/*MBB_JS*/" not in page and 'src="data/index.js"' in page
    assert str(sweep_copy) not in page + json.dumps(index)  # no absolute path of this machine
    for entry in index["runs"]:
        assert entry["status"] == "completed" and entry["problems"] == []
        data = _run_data(viewer, entry)
        assert str(sweep_copy) not in (viewer / entry["file"]).read_text()
        lines = (sweep_copy / entry["path"] / "events.jsonl").read_text().splitlines()
        assert len(data["events"]) == entry["events"] == len(lines)
        kinds = {e["kind"] for e in data["events"]}
        assert {"declared", "message", "ballot", "schedule_published", "window_ended"} <= kinds
        assert not any("wall" in e or "run_id" in e for e in data["events"])
        # taxonomy labels from classify_evidence, keyed by the utterance's seq, with evidence
        assert data["labels"]
        seqs = {e["seq"] for e in data["events"] if e["kind"] in ("declared", "message", "ballot")}
        for seq, labels in data["labels"].items():
            assert int(seq) in seqs
            for category, basis, evidence in labels:
                assert category and basis and evidence
        assert data["llm"] == {}
    # the memory: scratch entries (after-action reports) of every subrun are in the data
    entry = _entry(index, "base-seed0000")
    reports = [
        e
        for e in _run_data(viewer, entry)["events"]
        if e["kind"] == "scratch_written" and e["entry"] == "report"
    ]
    assert {e["subrun"] for e in reports} == {1, 2}


def test_rebuild_to_another_folder_replaces_old_data(sweep_copy, tmp_path) -> None:
    out = tmp_path / "v"
    build_viewer(sweep_copy, out)
    (out / "data" / "runs" / "000099.js").write_text("stale")
    shutil.rmtree(sweep_copy / "memory_off")
    res = build_viewer(sweep_copy, out)
    assert res.runs == 2
    assert sorted(p.name for p in (out / "data" / "runs").iterdir()) == ["000000.js", "000001.js"]


def test_a_folder_with_no_runs(tmp_path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    res = build_viewer(tmp_path / "empty")
    assert res.runs == 0
    index = _index(tmp_path / "empty" / "viewer")
    assert index["runs"] == []
    assert "no runs in empty/" in index["message"]


def test_a_single_run_folder(sweep_copy) -> None:
    run = sweep_copy / "base" / "base-seed0001"
    res = build_viewer(run, sweep_copy / "one")
    assert res.runs == 1
    assert _index(sweep_copy / "one")["runs"][0]["id"] == "base-seed0001"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_corrupt_line_is_named_and_the_rest_shown(sweep_copy) -> None:
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    lines[10] = lines[10][: len(lines[10]) // 2] + "#garbage"
    lines[11] = '{"not": "an event"}'
    log.write_text("\n".join(lines) + "\n")
    res = build_viewer(sweep_copy)
    assert res.runs == 4 and res.bad == []
    problems = [p for run, p in res.warnings if run == "base/base-seed0000"]
    assert any(p.startswith("line 11: not valid JSON") for p in problems), problems
    assert any(p.startswith("line 12: not an mbb event") for p in problems), problems
    assert any("gap" in p for p in problems)
    index = _index(sweep_copy / "viewer")
    entry = _entry(index, "base-seed0000")
    assert entry["events"] == len(lines) - 2
    assert len(_run_data(sweep_copy / "viewer", entry)["events"]) == len(lines) - 2
    assert _entry(index, "base-seed0001")["problems"] == []  # the others are untouched


def test_truncated_log(sweep_copy) -> None:
    log = sweep_copy / "memory_off" / "memory_off-seed0001" / "events.jsonl"
    text = log.read_text(encoding="utf-8")
    log.write_text(text[: len(text) // 2])  # cut mid-line, as a crash or a copy would
    res = build_viewer(sweep_copy)
    problems = [p for run, p in res.warnings if run.endswith("memory_off-seed0001")]
    assert any("incomplete last line" in p and "truncated" in p for p in problems), problems
    assert any("did not finish" in p for p in problems)
    entry = _entry(_index(sweep_copy / "viewer"), "memory_off-seed0001")
    assert entry["status"] == "unfinished" and entry["events"] > 10


def test_older_event_version_is_listed_with_the_reason(sweep_copy) -> None:
    log = sweep_copy / "base" / "base-seed0001" / "events.jsonl"
    log.write_text(log.read_text().replace('"v":1,', '"v":0,'))
    res = build_viewer(sweep_copy)
    assert res.runs == 4
    assert [run for run, _ in res.bad] == ["base/base-seed0001"]
    reason = res.bad[0][1]
    assert "event version 0" in reason and "reads version 1" in reason
    index = _index(sweep_copy / "viewer")
    entry = _entry(index, "base-seed0001")
    assert entry["status"] == "unreadable" and entry["error"] == reason and "file" not in entry
    assert sum(1 for r in index["runs"] if r["status"] == "completed") == 3


def test_empty_log_and_foreign_run_lines(sweep_copy) -> None:
    (sweep_copy / "base" / "base-seed0000" / "events.jsonl").write_text("")
    other = _lines(sweep_copy / "base" / "base-seed0001" / "events.jsonl")
    log = sweep_copy / "memory_off" / "memory_off-seed0000" / "events.jsonl"
    log.write_text(log.read_text() + other[5] + "\n")
    res = build_viewer(sweep_copy)
    assert res.bad == [("base/base-seed0000", "events.jsonl is empty")]
    problems = [p for run, p in res.warnings if run.endswith("memory_off-seed0000")]
    assert any("event of another run ('base-seed0001')" in p for p in problems), problems


def test_workspaces_and_notebooks_under_a_run_are_never_read(sweep_copy) -> None:
    run = sweep_copy / "base" / "base-seed0000"
    ws = run / "resource" / "workspaces" / "W1"
    ws.mkdir(parents=True)
    shutil.copy(run / "events.jsonl", ws / "events.jsonl")  # a worker's decoy log
    (ws / "evil.ipynb").write_text('{"cells": [{"source": "<script>alert(1)</script>"}]}')
    assert len(find_runs(sweep_copy)) == 4
    assert build_viewer(sweep_copy).runs == 4
    assert "alert(1)" not in "".join(
        p.read_text() for p in (sweep_copy / "viewer").rglob("*") if p.is_file()
    )


def test_hostile_text_cannot_end_the_data_script(sweep_copy) -> None:
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    i = next(i for i, ln in enumerate(lines) if json.loads(ln)["kind"] == "message")
    ev = json.loads(lines[i])
    ev["text"] = "</script><script>alert(1)</script> <!-- \u2028"
    lines[i] = json.dumps(ev)
    log.write_text("\n".join(lines) + "\n")
    build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    raw = (sweep_copy / "viewer" / entry["file"]).read_text()
    assert "</script>" not in raw and "<!--" not in raw and "\u2028" not in raw
    data = _run_data(sweep_copy / "viewer", entry)
    assert any(e.get("text") == ev["text"] for e in data["events"])


def test_llm_calls_carry_prompt_answer_and_usage_never_a_key(sweep_copy, monkeypatch) -> None:
    monkeypatch.setenv("MY_ENDPOINT_API_KEY", "hunter2-secret-value")
    run = sweep_copy / "base" / "base-seed0000"
    lines = _lines(run / "events.jsonl")
    first = json.loads(lines[0])
    first["params"]["llm"]["cache_file"] = "cache/llm.sqlite"
    lines[0] = json.dumps(first)
    request = {
        "model": "m1",
        "messages": [
            {"role": "system", "content": "You negotiate. key sk-abcdefghijklmnopqrstuv"},
            {"role": "user", "content": "my token is hunter2-secret-value; bid?"},
        ],
    }
    response = {"choices": [{"message": {"role": "assistant", "content": "I bid 120."}}]}
    cache = LlmCache(sweep_copy / "cache" / "llm.sqlite")
    from mbb.llm.cache import request_key

    key = request_key(request)
    cache.put(key, request, response)
    cache.close()
    call = {
        "kind": "llm_call",
        "v": 1,
        "run_id": first["run_id"],
        "seq": 5,
        "t": 0.0,
        "subrun": 1,
        "round": 1,
        "worker": "W1",
        "wall": 0.0,
        "role": "negotiator",
        "phase": "declare",
        "model": "m1",
        "prompt_tokens": 40,
        "completion_tokens": 4,
        "latency_s": 0.8,
        "cost_usd": 0.0012,
        "request_key": key,
    }
    lines.insert(5, json.dumps(call))
    for j in range(6, len(lines)):
        ev = json.loads(lines[j])
        ev["seq"] = j
        lines[j] = json.dumps(ev)
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    assert entry["llm_calls"] == 1 and entry["problems"] == []
    data = _run_data(sweep_copy / "viewer", entry)
    texts = data["llm"]["5"]
    assert "You negotiate." in texts["prompt"] and texts["answer"] == "I bid 120."
    everything = json.dumps(data)
    assert "sk-abcdefghijklmnopqrstuv" not in everything
    assert "hunter2-secret-value" not in everything
    assert "[redacted]" in texts["prompt"]
    (ev,) = [e for e in data["events"] if e["kind"] == "llm_call"]
    assert (ev["prompt_tokens"], ev["completion_tokens"], ev["latency_s"], ev["cost_usd"]) == (
        40,
        4,
        0.8,
        0.0012,
    )
    sqlite3.connect(sweep_copy / "cache" / "llm.sqlite").close()


def test_redact() -> None:
    auth = redact("Authorization: Bearer abcdefghijklmnop1234")
    assert "abcdefghijklmnop1234" not in auth and auth.startswith("Authorization: [redacted]")
    assert "s3cr3tvalue" not in redact('{"api_key": "s3cr3tvalue"}')
    assert redact("x XYZ-secret-42 y", ["XYZ-secret-42"]) == "x [redacted] y"
    assert redact("nothing here") == "nothing here"


def test_read_run_reports_lines_by_number(sweep_copy) -> None:
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    log.write_text(log.read_text() + "[1, 2]\n")
    run = read_run(log.parent)
    assert run.fatal is None
    assert any(p.startswith(f"line {len(_lines(log))}: not an mbb event") for p in run.problems)


def test_a_number_too_long_for_an_int_is_a_bad_line_not_a_crash(sweep_copy) -> None:
    """json.loads raises a plain ValueError (no `.msg`) past Python's int digit limit."""
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    n_events = len(_lines(log))
    log.write_text(log.read_text() + "1" * 5000 + "\n")
    run = read_run(log.parent)
    assert run.fatal is None and len(run.events) == n_events
    want = f"line {n_events + 1}: not valid JSON (Exceeds the limit (4300 digits)"
    assert any(p.startswith(want) for p in run.problems), run.problems


def test_cli_view(sweep_copy, tmp_path, capsys) -> None:
    assert main(["view", str(sweep_copy), "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "4 run(s)" in out and str(tmp_path / "v" / "index.html") in out
    assert main(["view", str(tmp_path / "missing")]) == 2
    (tmp_path / "none").mkdir()
    assert main(["view", str(tmp_path / "none")]) == 0
    assert "no runs" in capsys.readouterr().err
