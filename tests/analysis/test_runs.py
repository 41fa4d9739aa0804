"""`mbb.analysis.runs`: analyses read the runs that exist under any folder, grouped by cell;
unfinished, stopped and invalid runs are left out and said so; invalid ones come back, flagged,
when asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mbb.analysis.runs import cell_of, find_run_dirs, load_runs, run_status
from mbb.batch.build import load_params
from mbb.batch.runner import run_many

SMALL = {"subruns": 1, "workers": {"count": 3}}


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A study-shaped folder: runs/<cell>/<run>, two conditions of three seeds each, then one
    run marked invalid, one cut short (its last line gone) and one stopped."""
    root = tmp_path_factory.mktemp("study")
    for name in ("base", "memory_off"):
        cond = load_params(name, SMALL)
        run_many(cond, runs=3, out_dir=root / "runs" / name, processes=1).check()
    meta = root / "runs" / "base" / "base-seed0001" / "meta.json"
    d = json.loads(meta.read_text())
    d.update(
        valid=False,
        invalid_reason="12 % of LLM calls failed or repaired (over 5 %)",
        validity={"failed_or_repaired_share": 0.12, "valid": False},
    )
    meta.write_text(json.dumps(d))
    cut = root / "runs" / "memory_off" / "memory_off-seed0000" / "events.jsonl"
    lines = cut.read_text().splitlines(keepends=True)
    cut.write_text("".join(lines[:-1]))
    stopped = root / "runs" / "memory_off" / "memory_off-seed0002" / "events.jsonl"
    lines = stopped.read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["status"] = "stopped"
    stopped.write_text("".join(lines[:-1]) + json.dumps(last, separators=(",", ":")) + "\n")
    return root


def test_cells_are_run_ids_without_their_seed():
    assert cell_of("base-seed0003") == "base"
    assert cell_of("base.negotiators-glm-seed0012") == "base.negotiators-glm"
    assert cell_of("odd-seed-name") == "odd-seed-name"


def test_runs_are_found_under_any_folder_and_nothing_beneath_a_run(study):
    every = find_run_dirs([study])
    assert [p.name for p in every] == [
        *(f"base-seed000{i}" for i in range(3)),
        *(f"memory_off-seed000{i}" for i in range(3)),
    ]
    assert find_run_dirs([study / "runs" / "base" / "base-seed0002"]) == [every[2]]
    with pytest.raises(FileNotFoundError, match="no such folder"):
        find_run_dirs([study / "nowhere"])


def test_unusable_runs_say_why(study):
    runs = study / "runs"
    assert run_status(runs / "base" / "base-seed0000") == (True, None)
    ok, why = run_status(runs / "base" / "base-seed0001")
    assert not ok and why.startswith("invalid: 12 %")
    assert run_status(runs / "memory_off" / "memory_off-seed0000") == (False, "not finished")
    assert run_status(runs / "memory_off" / "memory_off-seed0002") == (False, "run stopped")


def test_left_out_runs_are_listed_and_invalid_ones_come_back_flagged(study, capsys):
    from mbb.analysis.runs import excluded_note

    tables = load_runs([study])
    kept = sorted(tables["runs"]["run_id"].to_list())
    assert kept == ["base-seed0000", "base-seed0002", "memory_off-seed0001"]
    ex = {r["run_id"]: r["reason"] for r in tables["excluded"].iter_rows(named=True)}
    assert set(ex) == {"base-seed0001", "memory_off-seed0000", "memory_off-seed0002"}
    assert set(tables["evaluations"]["run_id"].unique()) == set(kept)  # not only the runs table
    excluded_note(tables)
    said = capsys.readouterr().out
    assert "left out 1 run(s): invalid" in said and "not finished" in said
    flagged = load_runs([study], include_invalid=True)["runs"]
    row = flagged.filter(flagged["run_id"] == "base-seed0001").row(0, named=True)
    assert row["valid"] is False and row["bad_call_share"] is None  # no LLM call in its log
    assert flagged.filter(flagged["run_id"] == "base-seed0000")["valid"].to_list() == [True]


def test_valid_only_is_load_runs_without_the_invalid_runs(study):
    """A reader that needs invalid runs too (a report's spend) reads the logs once and cuts
    the valid runs from that: the same tables as `load_runs` without invalid runs."""
    from polars.testing import assert_frame_equal

    from mbb.analysis.runs import valid_only

    everything = load_runs([study], include_invalid=True)
    row = (
        everything["runs"]
        .filter(everything["runs"]["run_id"] == "base-seed0001")
        .row(0, named=True)
    )
    assert row["valid"] is False and row["invalid_reason"].startswith("invalid: 12 %")
    cut, plain = valid_only(everything), load_runs([study])
    assert set(cut) == set(plain)
    for name in plain:
        keys = ["run_id"] if "run_id" in plain[name].columns else []
        assert_frame_equal(
            cut[name].sort(keys, maintain_order=True) if keys else cut[name],
            plain[name].sort(keys, maintain_order=True) if keys else plain[name],
        )


def test_conditions_pick_cells_by_name_and_an_empty_choice_is_an_error(study):
    only = load_runs([study], conditions=["memory_off"])
    assert set(only["runs"]["condition"]) == {"memory_off"}
    with pytest.raises(ValueError, match="'urgent_worker' match no run; the runs found are of"):
        load_runs([study], conditions=["urgent_worker"])
    # one misspelled name among good ones was dropped without a word (a newcomer's find)
    with pytest.raises(ValueError, match="'memroy_off' match no run"):
        load_runs([study], conditions=["base", "memroy_off"])
    # a choice whose runs are all left out says how many and why, and how to read invalid ones
    with pytest.raises(ValueError) as err:
        load_runs([study / "runs" / "base" / "base-seed0001"])
    assert "left out: 1 invalid (include_invalid=True reads the invalid ones" in str(err.value)
    unfinished = [study / "runs" / "memory_off" / f"memory_off-seed000{i}" for i in (0, 2)]
    with pytest.raises(ValueError, match=r"left out: 1 not finished; 1 run stopped$"):
        load_runs(unfinished)
    empty = study / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no runs"):
        load_runs([empty])


def test_cells_split_the_tables_and_pair_with_their_baseline(study):
    from mbb.analysis.runs import baseline_cell, cells_of, condition_part

    tables = load_runs([study])
    cells = cells_of(tables)
    assert set(cells) == {"base", "memory_off"}
    assert set(cells["memory_off"]["runs"]["run_id"]) == {"memory_off-seed0001"}
    assert set(cells["base"]["evaluations"]["run_id"]) == {"base-seed0000", "base-seed0002"}
    assert baseline_cell("urgent_worker.negotiators-glm") == "base.negotiators-glm"
    assert baseline_cell("urgent_worker") == "base"
    assert baseline_cell("mech_fcfs-stub-a", baseline="mech_sjf") == "mech_sjf-stub-a"
    assert condition_part("urgent_worker.negotiators-glm") == "urgent_worker"
    assert condition_part("memory_off") == "memory_off"


def test_recorded_conditions_are_what_the_runs_were_told(study, tmp_path):
    from mbb.analysis.runs import recorded_conditions

    found = recorded_conditions([study])
    assert set(found) == {"base", "memory_off"}
    assert found["memory_off"] == load_params("memory_off", SMALL)
    assert set(recorded_conditions([study], ["memory_off"])) == {"memory_off"}
    with pytest.raises(ValueError, match="'memroy_off' match no run"):  # as load_runs says
        recorded_conditions([study], ["memroy_off"])
    # a log without even one complete event names no condition (load_runs says why)
    broken = tmp_path / "x" / "odd-seed0000"
    broken.mkdir(parents=True)
    (broken / "events.jsonl").write_text('{"kind": "run_sta')
    assert recorded_conditions([tmp_path]) == {}


def test_a_log_with_too_many_bad_calls_is_invalid_whatever_its_meta_says(study, tmp_path):
    """The verdict comes from the log: a received folder's meta.json saying `valid` does not
    make a run whose calls mostly failed count."""
    import shutil

    from test_viewer import _llm_call, _with_calls

    run = tmp_path / "base" / "base-seed0000"
    shutil.copytree(study / "runs" / "base" / "base-seed0000", run)
    calls = [_llm_call(run.name, 0) for _ in range(8)]
    calls += [_llm_call(run.name, 0, error="HTTP 500"), _llm_call(run.name, 0, repair=True)]
    _with_calls(run, calls)
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "valid": True, "invalid_reason": None}))
    ok, why = run_status(run)
    assert not ok and why.startswith("invalid: 20.0% of its 10 LLM calls"), why
    flagged = load_runs([tmp_path], include_invalid=True)["runs"].row(0, named=True)
    assert flagged["valid"] is False and flagged["bad_call_share"] == pytest.approx(0.2)
    # at a threshold its study recorded above that share, it counts
    (run / "meta.json").write_text(json.dumps({**meta, "validity": {"threshold": 0.25}}))
    assert run_status(run) == (True, None)
    # ...but no record makes a run whose calls mostly failed count: a threshold over 50 %
    # (1.0 made a run whose every call failed valid) is ignored for mbb's 5 %
    (run / "meta.json").write_text(json.dumps({**meta, "validity": {"threshold": 1.0}}))
    assert run_status(run)[1].startswith("invalid: 20.0% of its 10 LLM calls")


def test_a_run_id_with_a_control_character_is_left_out_with_the_reason(tmp_path) -> None:
    """A log and its folder both named `b\\x01-seed0001`: the report drew it as a condition
    `b\\x01`, and vl-convert aborted the process (SIGABRT) on the chart's text."""
    run_many(load_params("base", {"subruns": 1}), runs=1, out_dir=tmp_path / "c", processes=1)
    src = tmp_path / "c" / "base-seed0000"
    evil = tmp_path / "c" / "b\x01-seed0000"
    evil.mkdir()
    lines = (src / "events.jsonl").read_text().splitlines()
    (evil / "events.jsonl").write_text(
        "\n".join(json.dumps({**json.loads(x), "run_id": evil.name}) for x in lines) + "\n"
    )
    assert run_status(evil) == (False, "run id 'b\\x01-seed0000' holds characters mbb never writes")
    loaded = load_runs([tmp_path / "c"])
    assert loaded["runs"]["run_id"].to_list() == ["base-seed0000"]


def test_a_folder_not_named_by_its_run_is_refused_by_every_reader(tmp_path, capsys) -> None:
    """A red team's find: a folder named `base-seed0000<ESC>[31m<newline>INJECTED LINE` holding
    the log of base-seed0000 was left out by `load_runs` but accepted by `mbb tables` and `mbb
    view`, and `load_runs`' error carried the raw name (ESC, newline) to the notebook. One rule
    now (`folder_problem`) for the three, and no name reaches a message unescaped."""
    import shutil

    from mbb.batch.viewer import read_run
    from mbb.cli import main
    from mbb.core.eventlog import folder_problem

    run_many(load_params("base", {"subruns": 1}), runs=1, out_dir=tmp_path / "c", processes=1)
    src = tmp_path / "c" / "base-seed0000"
    evil = tmp_path / "evil" / "base-seed0000\x1b[31m\nINJECTED LINE"
    shutil.copytree(src, evil)
    assert main(["tables", str(evil.parent)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err, err
    assert "not of a run named as its folder" in err
    run = read_run(evil)
    assert run.fatal == "its log is of run 'base-seed0000', not of a run named as its folder"
    with pytest.raises(ValueError) as info:
        load_runs([evil.parent])
    said = str(info.value)
    assert "\x1b" not in said and "\n" not in said and "base-seed0000\\x1b[31m\\x0a" in said
    assert folder_problem(src, "base-seed0000") is None
    assert folder_problem(Path("."), "x") is not None  # `.` is the folder it names


_PIPE_CHECKS = """
import json, os, sys
from pathlib import Path
from mbb.analysis.runs import load_runs, recorded_conditions
from mbb.batch.build import load_params
from mbb.batch.outdir import claim
root = Path(sys.argv[1])
loaded = load_runs([root])
out = {"runs": loaded["runs"]["run_id"].to_list(),
       "excluded": loaded["excluded"]["reason"].to_list(),
       "conditions": sorted(recorded_conditions([root]))}
run = root / "base" / "base-seed0000"
os.unlink(run / "events.jsonl")
os.mkfifo(run / "events.jsonl")
out["conditions_after"] = sorted(recorded_conditions([root]))
with claim(root / "base", load_params("base", {"subruns": 1, "workers": {"count": 3}})):
    out["claimed"] = True
print(json.dumps(out))
"""


def test_a_meta_or_a_log_that_is_a_pipe_is_not_waited_on(study, tmp_path) -> None:
    """`load_runs` waited for ever on a run whose meta.json is a named pipe, and
    `recorded_conditions` and `mbb run --out` (the folder's condition, read from its logs) on an
    events.jsonl that is one. A meta.json that is a pipe is read as a missing one (the log
    judges the run); a log that is a pipe names no condition and is left out, said. (In a
    process of its own with a time limit: the old code blocked in a thread no alarm reaches.)"""
    import os
    import shutil
    import subprocess
    import sys

    run = tmp_path / "base" / "base-seed0000"
    shutil.copytree(study / "runs" / "base" / "base-seed0000", run)
    (run / "meta.json").unlink()
    os.mkfifo(run / "meta.json")
    piped = tmp_path / "base" / "base-seed0001"
    piped.mkdir()
    os.mkfifo(piped / "events.jsonl")
    proc = subprocess.run(
        [sys.executable, "-c", _PIPE_CHECKS, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runs"] == ["base-seed0000"]
    (why,) = out["excluded"]
    assert "not a regular file" in why
    assert out["conditions"] == ["base"] and out["conditions_after"] == []
    assert out["claimed"]


def test_a_linked_run_folder_or_a_log_that_is_a_folder_is_listed_not_lost(study, tmp_path):
    """Both were silently absent from load_runs and the viewer (the walk saw neither as a run):
    now each is left out with its reason. A run folder that is a link is never read; a link
    you name yourself is followed."""
    import shutil

    from mbb.analysis.runs import LINKED_RUN
    from mbb.batch.viewer import build_viewer

    base = tmp_path / "c" / "base"
    shutil.copytree(study / "runs" / "base" / "base-seed0000", base / "base-seed0000")
    elsewhere = tmp_path / "elsewhere" / "base-seed0002"
    shutil.copytree(study / "runs" / "base" / "base-seed0002", elsewhere)
    (base / "base-seed0002").symlink_to(elsewhere)
    (base / "base-seed0003" / "events.jsonl").mkdir(parents=True)
    loaded = load_runs([tmp_path / "c"])
    assert loaded["runs"]["run_id"].to_list() == ["base-seed0000"]
    reasons = dict(zip(*loaded["excluded"][["run_id", "reason"]].to_dict().values(), strict=True))
    assert reasons["base-seed0002"] == LINKED_RUN
    assert "not a regular file" in reasons["base-seed0003"]
    bad = dict(build_viewer(tmp_path / "c").bad)
    assert bad["base/base-seed0002"] == LINKED_RUN
    assert "not a regular file" in bad["base/base-seed0003"]
    assert load_runs([base / "base-seed0002"])["runs"]["run_id"].to_list() == ["base-seed0002"]


def test_runs_left_out_for_one_kind_of_reason_are_one_line(capsys):
    """Each invalid run has its own share of failed calls in its reason: a line per reason
    was a line per run (50 invalid runs, 50 lines). One line per kind, an example in full;
    the mechanisms' comparison says it through the same note."""
    import polars as pl

    from mbb.analysis.runs import excluded_note

    excluded = pl.DataFrame(
        {
            "run_id": ["a-seed0001", "a-seed0002", "a-seed0003", "b-seed0001"],
            "cell": ["a", "a", "a", "b"],
            "reason": [
                "invalid: 12% failed or repaired calls",
                "invalid: 30% failed or repaired calls",
                "invalid: 7% failed or repaired calls",
                "not finished",
            ],
        }
    )
    excluded_note({"excluded": excluded})
    assert capsys.readouterr().out.splitlines() == [
        "left out 3 run(s): invalid (e.g. a-seed0001: 12% failed or repaired calls)",
        "left out 1 run(s): not finished (e.g. b-seed0001)",
    ]
