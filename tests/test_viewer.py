"""`mbb view`: the data export, and every kind of bad input (the rest is still shown)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mbb.analysis.runs import find_run_dirs
from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.batch.viewer import build_viewer, read_run, redact
from mbb.cli import main
from mbb.core import eventlog
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
    assert len(find_run_dirs([sweep_copy])) == 4
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


def test_a_hostile_cache_row_is_listed_and_the_other_calls_shown(sweep_copy) -> None:
    """A colleague's LLM cache with one row nested past json's recursion: reading it raised a
    RecursionError out of `mbb view`. Now the row is counted among the run's problems, and the
    call whose row reads is shown with its prompt and answer."""
    run = sweep_copy / "base" / "base-seed0000"
    lines = _lines(run / "events.jsonl")
    first = json.loads(lines[0])
    first["params"]["llm"]["cache_file"] = "cache/llm.sqlite"
    lines[0] = json.dumps(first)
    cache = LlmCache(sweep_copy / "cache" / "llm.sqlite")
    cache.put("good", {"messages": [{"role": "user", "content": "bid?"}]}, {"text": "120"})
    cache.close()
    with sqlite3.connect(sweep_copy / "cache" / "llm.sqlite") as db:
        deep = "[" * 100_000 + "]" * 100_000
        db.execute("INSERT INTO responses VALUES ('deep', 'm', ?, ?, 0)", (deep, deep))
    db.close()
    calls = [_llm_call(first["run_id"], 0, request_key=key) for key in ("good", "deep")]
    lines[5:5] = [json.dumps(c) for c in calls]
    for j in range(len(lines)):
        ev = json.loads(lines[j])
        ev["seq"] = j
        lines[j] = json.dumps(ev)
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    res = build_viewer(sweep_copy)
    assert res.bad == []
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    assert entry["llm_calls"] == 2
    assert entry["problems"] == [
        "1 LLM cache row(s) of its calls could not be read (not JSON, or nested too deeply); "
        "those calls are shown without prompt and answer"
    ]
    data = _run_data(sweep_copy / "viewer", entry)
    assert data["llm"] == {"5": {"prompt": "[user]\nbid?", "answer": "120", "new_at": 0}}


def _endless_view(path: Path) -> None:
    """A SQLite file whose `responses` is a view that recurses without end."""
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE VIEW responses(key, model, request, response, created) AS "
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            "SELECT n, 'm', '{}', '{}', 0 FROM r"
        )
    db.close()


def test_a_cache_holding_a_view_is_refused_not_read_for_ever(sweep_copy, tmp_path) -> None:
    """A received folder's llm_cache.sqlite whose `responses` is an endless recursive view
    held `mbb view` (Ctrl-C did not stop it) and a study's resume for ever. A cache holding a
    view or a trigger is refused: the viewer says so with the run, a study stops in one line;
    a cache that is a link is refused too (a resume wrote into the file it pointed at)."""
    from mbb.core.errors import LlmCacheError

    run = sweep_copy / "base" / "base-seed0000"
    lines = _lines(run / "events.jsonl")
    first = json.loads(lines[0])
    first["params"]["llm"]["cache_file"] = "cache/llm.sqlite"
    lines[0] = json.dumps(first)
    (sweep_copy / "cache").mkdir()
    _endless_view(sweep_copy / "cache" / "llm.sqlite")
    lines[5:5] = [json.dumps(_llm_call(first["run_id"], 0, request_key="k"))]
    for j in range(len(lines)):
        lines[j] = json.dumps({**json.loads(lines[j]), "seq": j})
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    # in a child with a time limit: the old viewer never returned (SQLite does not see the
    # alarm that would fail the test in this process), so the test failed only by hanging CI
    code = (
        "from pathlib import Path; from mbb.batch.viewer import build_viewer; "
        f"print(build_viewer(Path({str(sweep_copy)!r})).bad)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]
    (problem,) = _entry(_index(sweep_copy / "viewer"), "base-seed0000")["problems"]
    assert problem == (
        "prompts and answers of its 1 LLM call(s) not shown: its cache llm.sqlite: not read: "
        "it holds a view ('responses'), which mbb's caches never do"
    )
    with pytest.raises(LlmCacheError, match="not an LLM cache of mbb's: it holds a view"):
        LlmCache(sweep_copy / "cache" / "llm.sqlite")
    real = tmp_path / "mine.sqlite"
    LlmCache(real).close()
    (tmp_path / "link.sqlite").symlink_to(real)
    with pytest.raises(LlmCacheError, match="a symbolic link"):
        LlmCache(tmp_path / "link.sqlite")


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
    """Past Python's int digit limit json.loads raised a plain ValueError (no `.msg`)."""
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    n_events = len(_lines(log))
    log.write_text(log.read_text() + "1" * 5000 + "\n")
    run = read_run(log.parent)
    assert run.fatal is None and len(run.events) == n_events
    assert f"line {n_events + 1}: not valid JSON (a corrupt log); line left out" in run.problems


def test_a_blank_line_is_a_refused_line_as_in_the_tables(sweep_copy) -> None:
    """A red team's find: three spaces as line 6 made `mbb tables` refuse the log and
    `load_runs` leave the run out, while the viewer skipped the line without a word and showed
    the run with no problem. Now the viewer lists it as the tables name it; empty lines at the
    end (an editor's) are no events for either."""
    from mbb.core.eventlog import EventLogError, read_lines

    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    log.write_text("\n".join([*lines[:5], "   ", *lines[5:]]) + "\n\n\n")
    with pytest.raises(EventLogError, match=r"events.jsonl:6: an empty line \(a corrupt log\)"):
        read_lines(log)
    run = read_run(log.parent)
    assert run.problems[0] == "line 6: an empty line (a corrupt log); line left out"
    assert len(run.events) == len(lines)
    log.write_text("\n".join(lines) + "\n\n\n")  # only trailing empty lines: clean for both
    assert len(read_lines(log)) == len(lines)
    assert read_run(log.parent).problems == []


def test_the_page_shows_only_lines_the_tables_accept(sweep_copy) -> None:
    """A negative bid, a bid past int64 (JavaScript would round it) and a key given twice (the
    viewer's json.loads kept the last `worker`, the tables refuse the line): the viewer showed
    all three and the tables refused the log. Now both read with one parser."""
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    evs = [json.loads(x) for x in lines]
    a, b, c = [i for i, e in enumerate(evs) if e["kind"] == "declared"][:3]
    lines[a] = json.dumps({**evs[a], "bid": -50})
    lines[b] = json.dumps({**evs[b], "bid": 10**30})
    lines[c] = lines[c][:-1] + ', "worker": "W9"}'
    log.write_text("\n".join(lines) + "\n")
    run = read_run(log.parent)
    assert run.fatal is None and len(run.events) == len(lines) - 3
    problems = "\n".join(run.problems)
    assert f"line {a + 1}: declared.bid: Input should be greater than or equal to 0" in problems
    assert f"line {b + 1}: declared.bid: Input should be less than or equal to" in problems
    assert f"line {c + 1}: the key 'worker' is given twice in one object" in problems
    for line in run.lines:  # what the page keeps is what the tables' parser gives
        assert eventlog.parse_line(line) == (json.loads(line), line)


def test_lines_nested_too_deeply_are_bad_lines_not_a_crash(sweep_copy, tmp_path) -> None:
    """A colleague's log with a line nested past the parser's recursion ("[[[[..." 100,000
    deep; json.loads raised RecursionError), and an event whose free-form `value` nests 950
    deep (walking it for the page exhausted the recursion): each is a bad line, reported, and
    the viewer builds. A value nesting 150 deep (within the parser's bound) is shown."""
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    first = json.loads(lines[0])
    deep_value = {
        "kind": "invalid_action", "v": first["v"], "run_id": first["run_id"], "seq": 10**6,
        "t": 0.0, "subrun": 1, "round": 1, "worker": "W1", "phase": "declaration",
        "field": "(backend)", "value": None, "rule": "x", "detail": "y",
    }  # fmt: skip
    text = json.dumps(deep_value)
    nested = text.replace('"value": null', '"value": ' + "[" * 950 + "]" * 950)
    kept = text.replace('"value": null', '"value": ' + "[" * 150 + "]" * 150)
    log.write_text(
        log.read_text() + "[" * 100_000 + "]" * 100_000 + "\n" + nested + "\n" + kept + "\n"
    )
    run = read_run(log.parent)
    assert run.fatal is None and len(run.events) == len(lines) + 1
    n = len(lines)
    for k in (n + 1, n + 2):
        want = f"line {k}: nested too deeply to be an mbb event (a corrupt or hostile log)"
        assert want + "; line left out" in run.problems
    build_viewer(sweep_copy, out=tmp_path / "v")
    assert (tmp_path / "v" / "index.html").exists()


def test_cli_view(sweep_copy, tmp_path, capsys) -> None:
    assert main(["view", str(sweep_copy), "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "4 run(s)" in out and str(tmp_path / "v" / "index.html") in out
    assert main(["view", str(tmp_path / "missing")]) == 2
    (tmp_path / "none").mkdir()
    assert main(["view", str(tmp_path / "none")]) == 0
    assert "no runs" in capsys.readouterr().err


# --- the runs table's data: per-run measures, validity, the user's columns ----------------------
def test_index_carries_each_runs_measures_from_the_analysis(sweep_copy) -> None:
    """Score, completion, deadline misses, credits and cost are `outcomes(tables, "run_id")`'s;
    the model is `run_models`' ('scripted' for scripted runs, never a persona)."""
    from mbb.analysis.outcome import outcomes
    from mbb.core.tables import tables_from_run_dirs

    build_viewer(sweep_copy)
    index = _index(sweep_copy / "viewer")
    for folder in ("base", "memory_off"):
        per = outcomes(tables_from_run_dirs(find_run_dirs([sweep_copy / folder])), "run_id")
        for row in per.iter_rows(named=True):
            (entry,) = [e for e in index["runs"] if e["id"] == row["run_id"]]
            assert entry["score"] == pytest.approx(row["score"])
            assert entry["completion"] == pytest.approx(row["completion"])
            assert entry["deadline_miss"] == pytest.approx(row["deadline_miss"])
            assert entry["credits"] == pytest.approx(row["credits_per_run"])
            assert entry["cost_usd"] is None  # n/a (llm_na says why), never $0
            assert entry["model"] == "scripted" and entry["valid"] is True
            assert entry["invalid_actions"] == 0 and entry["llm_calls"] == 0
            assert entry["failed_calls"] is None and entry["tokens"] is None
            assert entry["llm_na"] == "scripted run: no API calls"  # why, for the viewer
    assert index["invalid_share"] == 0.05 and index["columns"] == []
    # the search over every run: one text file for these runs, rows of [seq, subrun, round,
    # worker, to, source, index of the text], each distinct text once
    (shard,) = index["text"]
    text = (sweep_copy / "viewer" / shard["file"]).read_text()
    assert text.startswith("MBB.text(0,")
    data = json.loads(text[len("MBB.text(0,") : -3])
    assert sorted(data["runs"]) == [str(e["n"]) for e in index["runs"]]
    sources = {r[5] for rs in data["runs"].values() for r in rs}
    assert {"declaration", "public", "private", "ballot", "memory"} <= sources
    assert len(set(data["strings"])) == len(data["strings"])
    run0 = _run_data(sweep_copy / "viewer", index["runs"][0])
    notes = {e["seq"]: e["note"] for e in run0["events"] if e["kind"] == "declared"}
    for seq, _s, _r, _w, _to, src, i in data["runs"]["0"]:
        if src == "declaration":
            assert data["strings"][i] == notes[seq]


def _llm_call(run_id: str, seq: int, **kw) -> dict:
    call = {
        "kind": "llm_call",
        "v": 1,
        "run_id": run_id,
        "seq": seq,
        "t": 0.0,
        "subrun": 1,
        "round": 1,
        "worker": "W1",
        "role": "negotiator",
        "phase": "declare",
        "model": "m1",
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "cost_usd": 0.001,
    }
    return {**call, **kw}


def _with_calls(run: Path, calls: list[dict]) -> None:
    """Insert `calls` after the run's first event, renumbering seq (a log mbb would write)."""
    lines = [json.loads(x) for x in _lines(run / "events.jsonl")]
    events = [lines[0], *calls, *lines[1:]]
    for i, ev in enumerate(events):
        ev["seq"] = i
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_decisions_lost_to_a_backend_error_count_as_failed_calls(sweep_copy) -> None:
    """A default applied because an agent's call raised something other than a failed LLM call
    (here a RecursionError, as an answer of deeply nested JSON raised before mbb read such
    answers as malformed) counts as a failed call, in meta.json's count and the viewer's alike;
    a failed LLM call's own default is not counted twice; the count reads events by content,
    whatever the log's spacing, and a hostile value does not stop it."""
    from mbb.core.validity import run_validity

    run = sweep_copy / "base" / "base-seed0000"

    def lost(value, seq=0):
        return {
            "kind": "invalid_action", "v": 1, "run_id": "base-seed0000", "seq": seq, "t": 0.0,
            "subrun": 1, "round": 1, "worker": "W1", "phase": "declaration",
            "field": "(backend)", "value": value, "rule": "default declaration", "detail": "x",
        }  # fmt: skip

    calls = [_llm_call("base-seed0000", 0) for _ in range(18)]
    calls += [lost("RecursionError"), lost("LlmUnavailable"), lost({"a": [1]})]
    _with_calls(run, calls)
    lines = _lines(run / "events.jsonl")
    v = run_validity(lines, 0.05)
    assert (v["llm_calls"], v["failed_calls"], v["backend_errors"]) == (18, 0, 2)
    assert v["failed_or_repaired_share"] == pytest.approx(2 / 20) and not v["valid"]
    spaced = [json.dumps(json.loads(x), indent=None, separators=(", ", ": ")) for x in lines]
    assert run_validity(spaced, 0.05) == v
    build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    assert entry["valid"] is False
    assert entry["invalid_reason"] == (
        "2 of 20 LLM calls failed or needed a repair (10.0% > 5%: 0 failed, 0 repaired, "
        "2 lost to a backend error)"
    )


def test_a_run_with_too_many_failed_or_repaired_calls_is_invalid(sweep_copy) -> None:
    run = sweep_copy / "base" / "base-seed0000"
    calls = [_llm_call("base-seed0000", 0) for _ in range(18)]
    calls.append(_llm_call("base-seed0000", 0, error="HTTP 500"))
    calls.append(_llm_call("base-seed0000", 0, repair=True, model="m2"))
    _with_calls(run, calls)
    build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    assert entry["model"] == "m1+m2"  # the models its calls used
    assert "llm_na" not in entry  # it made API calls: its zeros are zeros
    assert (entry["llm_calls"], entry["failed_calls"], entry["repaired_calls"]) == (20, 1, 1)
    assert entry["bad_call_share"] == pytest.approx(0.1)
    assert entry["tokens"] == 20 * 110 and entry["cost_usd"] == pytest.approx(0.02)
    assert entry["valid"] is False
    assert entry["invalid_reason"] == (
        "2 of 20 LLM calls failed or needed a repair (10.0% > 5%: 1 failed, 1 repaired)"
    )
    # a higher threshold; meta.json can make a run less valid, never more (a received folder
    # cannot whitewash a log with too many failed calls)
    build_viewer(sweep_copy, invalid_share=0.2)
    assert _entry(_index(sweep_copy / "viewer"), "base-seed0000")["valid"] is True
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "valid": True}))
    build_viewer(sweep_copy)
    assert _entry(_index(sweep_copy / "viewer"), "base-seed0000")["valid"] is False
    (run / "meta.json").write_text(
        json.dumps({**meta, "valid": False, "invalid_reason": "judge disagreed"})
    )
    build_viewer(sweep_copy, invalid_share=0.2)
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    assert (entry["valid"], entry["invalid_reason"]) == (False, "judge disagreed")
    # a meta.json whose fields have other types is not believed
    (run / "meta.json").write_text(json.dumps({**meta, "valid": "yes", "invalid_reason": 3}))
    build_viewer(sweep_copy)
    assert _entry(_index(sweep_copy / "viewer"), "base-seed0000")["valid"] is False


def test_user_columns_from_the_folder_and_from_files(sweep_copy, tmp_path, capsys) -> None:
    (sweep_copy / "viewer-columns.csv").write_text(
        "run_id,judge score,note\nbase-seed0000,0.75,fine\nbase-seed0001,,odd\nnope-seed9,1,\n"
    )
    extra = tmp_path / "more.json"
    extra.write_text(json.dumps({"memory_off-seed0000": {"tokens": 5, "hours": 1.5}}))
    assert main(["view", str(sweep_copy), "--columns", str(extra)]) == 0
    err = capsys.readouterr().err
    assert "1 run id(s) in the columns file(s) are not in this folder: nope-seed9" in err
    index = _index(sweep_copy / "viewer")
    cols = {c["name"]: c for c in index["columns"]}
    # a name taken by a built-in measure is kept apart, with its file
    assert set(cols) == {"judge score", "note", "tokens (more.json)", "hours"}
    assert cols["judge score"]["kind"] == "number" and cols["note"]["kind"] == "text"
    assert _entry(index, "base-seed0000")["cols"] == {"judge score": 0.75, "note": "fine"}
    assert _entry(index, "base-seed0001")["cols"] == {"judge score": None, "note": "odd"}
    assert _entry(index, "memory_off-seed0000")["cols"] == {"tokens (more.json)": 5, "hours": 1.5}
    # a file that cannot be used is reported, and the viewer is still written
    extra.write_text(json.dumps([{"run_id": "base-seed0000", "nested": {"a": 1}}]))
    res = build_viewer(sweep_copy, columns=[extra])
    assert (
        "columns",
        "more.json: row 1, column 'nested': a dict is not a value for a column "
        "(numbers or text only)",
    ) in res.warnings
    assert main(["view", str(sweep_copy), "--columns", str(tmp_path / "missing.csv")]) == 2


# --- hostile run folders (issue 26): strict types, redaction everywhere ----------------------
def test_lines_of_the_wrong_type_are_left_out_and_the_run_shown(sweep_copy) -> None:
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    n = len(lines)
    evs = [json.loads(x) for x in lines]
    i = next(i for i, e in enumerate(evs) if e["kind"] == "message")
    j = next(i for i, e in enumerate(evs) if e["kind"] == "declared")
    k = next(i for i, e in enumerate(evs) if e["kind"] == "ballot")
    lines[i] = json.dumps({**evs[i], "subrun": "__proto__"})
    lines[j] = json.dumps({**evs[j], "bid": "lots"})
    lines[k] = json.dumps({**evs[k], "ranking": {"W1": 1}})
    log.write_text("\n".join(lines) + "\n")
    res = build_viewer(sweep_copy)
    assert res.bad == []
    problems = [p for run, p in res.warnings if run == "base/base-seed0000"]
    assert any(p.startswith(f"line {i + 1}: message.subrun: Input should be") for p in problems)
    assert any(p.startswith(f"line {j + 1}: declared.bid: Input should be") for p in problems)
    assert any(p.startswith(f"line {k + 1}: ballot.ranking: Input should be") for p in problems)
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    data = _run_data(sweep_copy / "viewer", entry)
    assert len(data["events"]) == entry["events"] == n - 3
    assert all(isinstance(e.get("subrun"), (int, type(None))) for e in data["events"])


def test_a_proto_key_never_reaches_a_data_file(sweep_copy) -> None:
    """In a JavaScript object literal, `"__proto__": {...}` sets the object's prototype."""
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    first = json.loads(lines[0])
    first["params"]["__proto__"] = {"polluted": True}
    first["workers"][0]["__proto__"] = "x"
    lines[0] = json.dumps(first)
    log.write_text("\n".join(lines) + "\n")
    build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "base-seed0000")
    raw = (sweep_copy / "viewer" / entry["file"]).read_text()
    assert '"__proto__"' not in raw
    data = _run_data(sweep_copy / "viewer", entry)
    assert data["events"][0]["params"]["[__proto__]"] == {"polluted": True}


def test_secrets_are_redacted_in_every_file_the_viewer_writes(sweep_copy, monkeypatch) -> None:
    """An endpoint that echoes the key: the value lands in messages, notes, memory, repairs,
    the run's params and meta.json; none of it reaches the viewer's files (run data, index,
    text for the search over every run)."""
    secret = "echoed-SECRET-value-42"
    monkeypatch.setenv("MBB_VIEWER_TEST_API_KEY", secret)
    run = sweep_copy / "base" / "base-seed0000"
    evs = [json.loads(x) for x in _lines(run / "events.jsonl")]
    seen = set()
    for e in evs:
        field_ = {"message": "text", "declared": "note", "scratch_written": "text"}.get(e["kind"])
        if field_ and e["kind"] not in seen:
            seen.add(e["kind"])
            e[field_] = f"the key is {secret}; Authorization: Bearer abcdefghijklmnopqrstuv"
    evs[0]["params"]["description"] = f"key {secret}"
    evs[0]["condition"] = f"base {secret}"
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    (sweep_copy / "viewer-columns.csv").write_text(f"run_id,note\nbase-seed0000,{secret}\n")
    build_viewer(sweep_copy)
    files = [p for p in (sweep_copy / "viewer").rglob("*") if p.is_file()]
    everything = "".join(p.read_text(encoding="utf-8") for p in files)
    assert secret not in everything and "abcdefghijklmnopqrstuv" not in everything
    index = _index(sweep_copy / "viewer")
    entry = _entry(index, "base-seed0000")
    assert entry["condition"] == "base [redacted]" and entry["cols"]["note"] == "[redacted]"
    shard = (sweep_copy / "viewer" / index["text"][0]["file"]).read_text()
    assert "the key is [redacted]; Authorization: [redacted]" in shard


# --- runs being written ---------------------------------------------------------------------------
def _half_written(src: Path, dst: Path) -> Path:
    """A copy of run `src` as it looks while being written: half its log (the last line cut)
    and no meta.json yet."""
    dst.mkdir(parents=True)
    text = (src / "events.jsonl").read_text()
    (dst / "events.jsonl").write_text(text[: len(text) // 2])
    return dst


def test_a_run_being_written_is_running_not_damaged(sweep_copy) -> None:
    import fcntl
    import os

    src = sweep_copy / "base" / "base-seed0001"
    live = _half_written(src, sweep_copy / "live" / "base-seed0001")
    res = build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "live/base-seed0001")
    assert entry["status"] == "running" and entry["problems"] == [] and entry["events"] > 10
    assert not [w for w in res.warnings if w[0].startswith("live/")]
    # a minute later, with nobody writing: interrupted, and said so
    old = live / "events.jsonl"
    os.utime(old, (old.stat().st_atime - 120, old.stat().st_mtime - 120))
    build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "live/base-seed0001")
    assert entry["status"] == "unfinished"
    assert any("truncated" in p for p in entry["problems"])
    # ... unless the folder's writer still holds its lock (mbb.batch.outdir.claim)
    fd = os.open(live.parent / ".mbb.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        build_viewer(sweep_copy)
        assert _entry(_index(sweep_copy / "viewer"), "live/base-seed0001")["status"] == "running"
    finally:
        os.close(fd)
    # a run folder with an empty log, just created: running, not unreadable
    (sweep_copy / "live" / "base-seed0002").mkdir()
    (sweep_copy / "live" / "base-seed0002" / "events.jsonl").write_text("")
    res = build_viewer(sweep_copy)
    entry = _entry(_index(sweep_copy / "viewer"), "live/base-seed0002")
    assert entry["status"] == "running" and "file" not in entry and res.bad == []


def test_watch_picks_up_runs_as_they_are_written(sweep_copy, tmp_path) -> None:
    import threading

    from mbb.batch.viewer import watch_viewer

    study = tmp_path / "study"
    shutil.copytree(sweep_copy / "base", study / "base")
    src = sweep_copy / "memory_off" / "memory_off-seed0000"
    out = tmp_path / "v"
    stop = threading.Event()
    results = []
    t = threading.Thread(
        target=watch_viewer,
        args=(study, out),
        kwargs={"interval": 0.1, "stop": stop.is_set, "report": results.append},
    )
    t.start()

    def index_when(pred, timeout=20.0):
        import time

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                idx = _index(out)
            except (OSError, ValueError):
                idx = None
            if idx is not None and pred(idx):
                return idx
            time.sleep(0.05)
        raise AssertionError("the viewer was not updated")

    try:
        idx = index_when(lambda i: len(i["runs"]) == 2)
        assert idx["live"] == 0.1
        first_version = idx["version"]
        live = _half_written(src, study / "memory_off" / "memory_off-seed0000")
        idx = index_when(lambda i: len(i["runs"]) == 3)
        entry = _entry(idx, "memory_off-seed0000")
        assert entry["status"] == "running" and entry["problems"] == []
        assert idx["version"] > first_version
        shutil.copy(src / "events.jsonl", live / "events.jsonl")
        shutil.copy(src / "meta.json", live / "meta.json")
        idx = index_when(lambda i: _entry(i, "memory_off-seed0000")["status"] == "completed")
        entry = _entry(idx, "memory_off-seed0000")
        assert entry["v"] > 1 and entry["problems"] == []
        assert len(_run_data(out, entry)["events"]) == len(_lines(src / "events.jsonl"))
        # the text of the new run is searchable
        assert any(str(entry["n"]) in (out / t["file"]).read_text() for t in idx["text"])
        shutil.rmtree(study / "base" / "base-seed0000")
        idx = index_when(lambda i: len(i["runs"]) == 2)
        assert not (out / "data" / "runs" / "000000.js").exists()
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive() and results[0].runs == 2


def test_cli_view_watch(sweep_copy, monkeypatch, capsys) -> None:
    """`mbb view DIR --watch`: builds, then passes until Ctrl-C (here: the first pause)."""
    import mbb.batch.viewer as viewer_mod

    def interrupted(_seconds):
        raise KeyboardInterrupt

    assert main(["view", str(sweep_copy), "--watch", "0"]) == 2
    monkeypatch.setattr(viewer_mod.time, "sleep", interrupted)
    assert main(["view", str(sweep_copy), "--watch"]) == 0
    out = capsys.readouterr().out
    assert "watching" in out and "every 2 s" in out and "4 run(s)" in out
    assert out.rstrip().endswith("stopped watching")
    assert _index(sweep_copy / "viewer")["live"] == 2.0


def test_watch_says_problems_that_appear_after_the_first_pass(sweep_copy, monkeypatch, capsys):
    """Watching, later passes printed only counts: a run that became unreadable, or a line
    that went corrupt, was on the page and nowhere on the terminal. Each new problem is said
    once, as a one-shot build says it."""
    import os

    import mbb.batch.viewer as viewer_mod

    log = sweep_copy / "base" / "base-seed0001" / "events.jsonl"
    pauses = []

    def pause(_seconds):
        pauses.append(1)
        if len(pauses) == 1:
            log.write_text(log.read_text() + "{not json\n")
            os.mkfifo(sweep_copy / "memory_off" / "memory_off-seed0009" / "events.jsonl")
        elif len(pauses) == 3:
            raise KeyboardInterrupt

    (sweep_copy / "memory_off" / "memory_off-seed0009").mkdir()
    monkeypatch.setattr(viewer_mod.time, "sleep", pause)
    assert main(["view", str(sweep_copy), "--watch", "1"]) == 0
    err = capsys.readouterr().err
    corrupt = "warning: base/base-seed0001: line "
    piped = "warning: memory_off/memory_off-seed0009: not shown: events.jsonl: not a regular file"
    assert err.count(corrupt) == 1 and err.count(piped) == 1, err


def test_watch_refuses_a_link_planted_between_passes(sweep_copy, tmp_path) -> None:
    """A link planted as `viewer/data/runs` after the first pass had the later passes delete
    and replace its target's files: the check ran once, before the first pass."""
    from mbb.batch.outdir import OutputError
    from mbb.batch.viewer import watch_viewer

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "000000.js").write_text("precious")
    passes = []

    def stop() -> bool:
        if not passes:
            shutil.rmtree(sweep_copy / "viewer" / "data" / "runs")
            (sweep_copy / "viewer" / "data" / "runs").symlink_to(outside)
            shutil.rmtree(sweep_copy / "base" / "base-seed0000")  # a run gone: its file deleted
        passes.append(1)
        return len(passes) > 2

    with pytest.raises(OutputError, match=r"data/runs: a symbolic link"):
        watch_viewer(sweep_copy, interval=0.01, stop=stop)
    assert [f.name for f in outside.iterdir()] == ["000000.js"]
    assert (outside / "000000.js").read_text() == "precious"


def test_watch_sees_a_log_rewritten_with_its_old_size_and_time(sweep_copy) -> None:
    """The change check compared a log's size and modification time only, through links:
    garbage of the same size with its time put back (`touch -r`), or a link to a copy, left
    the page showing the old run as completed. Change time and inode are compared too."""
    import os

    from mbb.batch.viewer import watch_viewer

    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    results = []
    passes = []

    def stop() -> bool:
        if not passes:
            st = log.stat()
            log.write_text("x" * (st.st_size - 1) + "\n")
            os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))
        passes.append(1)
        return len(passes) > 1

    watch_viewer(sweep_copy, interval=0.01, stop=stop, report=results.append)
    assert len(results) == 2, "the second pass saw no change"
    assert ("base/base-seed0000", "no valid event in events.jsonl") in results[-1].bad


def test_columns_files_that_are_links_or_pipes_are_said_not_skipped(sweep_copy, tmp_path):
    import os

    (tmp_path / "cols.csv").write_text("run_id,x\nbase-seed0000,1\n")
    (sweep_copy / "viewer-columns.csv").symlink_to(tmp_path / "cols.csv")
    os.mkfifo(sweep_copy / "viewer-columns.json")
    res = build_viewer(sweep_copy)
    said = [p for run, p in res.warnings if run == "columns"]
    assert said == [
        "viewer-columns.csv: a symbolic link or not a regular file: not read",
        "viewer-columns.json: a symbolic link or not a regular file: not read",
    ]
    assert _index(sweep_copy / "viewer")["columns"] == []


def test_a_run_an_analysis_cannot_take_costs_only_its_own_measures(sweep_copy, monkeypatch):
    import mbb.batch.viewer as viewer_mod

    real = viewer_mod._measures

    def picky(tables):
        if "base-seed0000" in tables["evaluations"]["run_id"].to_list():
            raise ValueError("cannot take this one")
        return real(tables)

    monkeypatch.setattr(viewer_mod, "_measures", picky)
    res = build_viewer(sweep_copy)
    assert res.warnings == [
        ("base/base-seed0000", "measures unavailable: ValueError: cannot take this one")
    ]
    index = _index(sweep_copy / "viewer")
    assert _entry(index, "base-seed0000")["score"] is None
    assert all(e["score"] is not None for e in index["runs"] if e["id"] != "base-seed0000")
    assert _entry(index, "base-seed0000")["file"]  # still shown, with its labels
    assert _run_data(sweep_copy / "viewer", _entry(index, "base-seed0000"))["labels"]


# --- a colleague's folder cannot make the viewer read or write outside it (a red team's finds) --
def test_links_planted_where_the_viewer_writes_are_refused_and_their_targets_kept(
    sweep_copy, tmp_path
) -> None:
    """`viewer/data/runs` planted as a link: the build deleted the target folder's *.js and
    wrote its own there; `viewer/.index.html.tmp` planted as a link: the page was written
    through it into the target. Now a linked folder is refused in one line, and every file is
    written as a fresh file renamed into place."""
    from mbb.batch.outdir import OutputError

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "app.js").write_text("precious\n")
    (victim / "notes.txt").write_text("precious\n")
    data = sweep_copy / "viewer" / "data"
    data.mkdir(parents=True)
    (data / "runs").symlink_to(victim)
    with pytest.raises(OutputError, match=r"data/runs: a symbolic link"):
        build_viewer(sweep_copy)
    assert main(["view", str(sweep_copy)]) == 2
    (data / "runs").unlink()
    (sweep_copy / "viewer" / ".index.html.tmp").symlink_to(victim / "notes.txt")
    (data / ".index.js.tmp").symlink_to(victim / "notes.txt")
    build_viewer(sweep_copy)
    assert (victim / "app.js").read_text() == (victim / "notes.txt").read_text() == "precious\n"
    assert not (sweep_copy / "viewer" / "index.html").is_symlink()


def test_a_cache_outside_the_folder_is_read_only_when_named(sweep_copy, tmp_path) -> None:
    """A log naming `llm.cache_file` as an absolute path, a path up out of the folder, a home
    folder that does not exist, or a name with a NUL: the viewer opened caches anywhere (and
    crashed on the last two). Now only caches inside the folder are read, and those named."""
    private = tmp_path / "private.sqlite"
    cache = LlmCache(private)
    cache.put("k1", {"messages": [{"role": "user", "content": "PRIVATE PROMPT"}]}, {"text": "x"})
    cache.close()
    run = sweep_copy / "base" / "base-seed0000"
    lines = _lines(run / "events.jsonl")
    first = json.loads(lines[0])
    call = _llm_call(first["run_id"], 0, request_key="k1")
    lines.insert(5, json.dumps(call))
    for name in (str(private), "../../../private.sqlite", "~nobody_here_xyz/c.sqlite", "a\0b"):
        first["params"]["llm"]["cache_file"] = name
        evs = [first, *[json.loads(x) for x in lines[1:]]]
        text = "\n".join(json.dumps({**e, "seq": j}) for j, e in enumerate(evs))
        (run / "events.jsonl").write_text(text + "\n")
        res = build_viewer(sweep_copy, out=tmp_path / "v")
        everything = "".join(p.read_text() for p in (tmp_path / "v").rglob("*.js"))
        assert "PRIVATE PROMPT" not in everything, name
        assert any("not shown: no cache inside the folder" in w for _, w in res.warnings)
    build_viewer(sweep_copy, out=tmp_path / "v", llm_caches=[private])
    assert "PRIVATE PROMPT" in "".join(p.read_text() for p in (tmp_path / "v").rglob("*.js"))


def test_linked_logs_pipes_and_column_files_are_not_read(sweep_copy, tmp_path) -> None:
    """`events.jsonl` as a link to a log elsewhere was read and shown; as a pipe (mkfifo) it
    hung the build; `viewer-columns.json` as a link to a file of yours had its values shown and
    its keys listed. Now each is left out, said."""
    import os

    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(sweep_copy / "base" / "base-seed0001", elsewhere)
    (sweep_copy / "stolen").mkdir()
    (sweep_copy / "stolen" / "events.jsonl").symlink_to(elsewhere / "events.jsonl")
    (sweep_copy / "piped").mkdir()
    os.mkfifo(sweep_copy / "piped" / "events.jsonl")
    secret = tmp_path / "credentials.json"
    secret.write_text(json.dumps({"base-seed0000": {"also": "SHOWN"}, "prod-db": {"x": 1}}))
    (sweep_copy / "viewer-columns.json").symlink_to(secret)
    res = build_viewer(sweep_copy, out=tmp_path / "v")
    bad = dict(res.bad)
    why = "events.jsonl: not a regular file (a symbolic link or a pipe): not read"
    assert bad["stolen"] == bad["piped"] == why
    index = (tmp_path / "v" / "data" / "index.js").read_text()
    assert "SHOWN" not in index and "prod-db" not in index


def test_paths_of_this_machine_are_named_only_where_a_path_is(sweep_copy) -> None:
    """The home folder's path was replaced as a plain substring: with home `/root`, a message
    saying `/rooted` read `~ed`. Now a prefix is replaced only where a path ends or goes on."""
    home = str(Path.home())
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    evs = [json.loads(x) for x in lines]
    i = next(i for i, e in enumerate(evs) if e["kind"] == "message")
    lines[i] = json.dumps({**evs[i], "text": f"see {home}ed, {home}/notes and {home}"})
    log.write_text("\n".join(lines) + "\n")
    build_viewer(sweep_copy)
    data = _run_data(sweep_copy / "viewer", _entry(_index(sweep_copy / "viewer"), "base-seed0000"))
    (shown,) = [e["text"] for e in data["events"] if e["kind"] == "message" and "see " in e["text"]]
    assert shown == f"see {home}ed, ~/notes and ~"


def test_a_name_with_an_escape_sequence_never_reaches_the_terminal(sweep_copy, capsys) -> None:
    """A run folder named with ESC [2J (clear the screen) in a colleague's folder: its warning
    printed the sequence raw. Control characters are now written out as \\xNN."""
    evil = sweep_copy / "base" / "run\x1b[2J"
    shutil.copytree(sweep_copy / "base" / "base-seed0000", evil)
    (evil / "events.jsonl").write_text("not json\n")
    assert main(["view", str(sweep_copy)]) == 0
    err = capsys.readouterr().err
    assert "run\\x1b[2J" in err and "\x1b" not in err


def test_a_secret_across_the_prompts_cut_is_redacted_whole(sweep_copy, monkeypatch) -> None:
    """A prompt was cut to 20,000 characters before redaction: an API key's value straddling
    the cut kept its head in the page (the env value no longer matched whole)."""
    secret = "Zq8-walk-not-a-real-token-value"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    run = sweep_copy / "base" / "base-seed0000"
    lines = _lines(run / "events.jsonl")
    first = json.loads(lines[0])
    first["params"]["llm"]["cache_file"] = "cache/llm.sqlite"
    cache = LlmCache(sweep_copy / "cache" / "llm.sqlite")
    prompt = "x" * (20_000 - len("[user]\n") - 12) + secret  # the cut falls 12 chars in
    cache.put("k", {"messages": [{"role": "user", "content": prompt}]}, {"text": "ok"})
    cache.close()
    call = _llm_call(first["run_id"], 0, request_key="k")
    evs = [first, *[json.loads(x) for x in lines[1:5]], call, *[json.loads(x) for x in lines[5:]]]
    text = "\n".join(json.dumps({**e, "seq": j}) for j, e in enumerate(evs))
    (run / "events.jsonl").write_text(text + "\n")
    build_viewer(sweep_copy)
    everything = "".join(p.read_text() for p in (sweep_copy / "viewer").rglob("*.js"))
    assert secret[:8] not in everything  # not even its head: redacted whole, then cut


def test_a_number_the_page_would_round_is_said(sweep_copy) -> None:
    """A bid of 9007199254740993 (2^53 + 1, within int64, so the tables keep it) showed as
    ...992 in the page with nothing said (a red team's find)."""
    log = sweep_copy / "base" / "base-seed0000" / "events.jsonl"
    lines = _lines(log)
    evs = [json.loads(x) for x in lines]
    i = next(i for i, e in enumerate(evs) if e["kind"] == "declared")
    lines[i] = json.dumps({**evs[i], "bid": 2**53 + 1})
    log.write_text("\n".join(lines) + "\n")
    run = read_run(log.parent)
    assert len(run.events) == len(lines)
    assert run.problems == [
        "a number past 2^53 is shown rounded in the page, which reads numbers as JavaScript "
        f"does (first: line {i + 1}, bid = 9007199254740993); the tables hold it exactly"
    ]


def test_the_page_and_the_index_agree_on_which_measures_are_llm_only():
    """The page marks a scripted run's LLM-only columns from its own list; it must be the
    index's (`LLM_MEASURES`), or a new LLM measure would read 0 or blank for scripted runs."""
    import re

    import mbb.batch.viewer as viewer_module
    from mbb.batch.viewer import LLM_MEASURES

    js = (Path(viewer_module.__file__).parent / "viewer_static" / "viewer.js").read_text()
    (listed,) = re.findall(r"var LLM_ONLY = \{([^}]*)\}", js)
    assert re.findall(r"(\w+): true", listed) == list(LLM_MEASURES)
