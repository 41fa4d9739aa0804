"""Sweeps: 3 conditions x 2 seeds locally and on a Dask LocalCluster give identical results;
a deliberately failing condition is reported without stopping the others."""

from __future__ import annotations

import json

import pytest

from mbb.batch.sweep import parse_seeds, plan_sweep, run_sweep
from mbb.cli import main
from mbb.core.eventlog import read_lines

PROBE = "tests/fixtures/sweep_probe.ipynb"


def _payloads(cond_dir):
    out = {}
    for events in sorted(cond_dir.glob("*/events.jsonl")):
        lines = []
        for line in read_lines(events):
            d = json.loads(line)
            d.pop("wall")
            d.get("provenance", {}).pop("git_revision", None)
            lines.append(json.dumps(d, sort_keys=True))
        out[events.parent.name] = lines
    return out


@pytest.fixture(scope="module")
def params_files(tmp_path_factory, root):
    d = tmp_path_factory.mktemp("params")
    base = root / "params" / "base.yaml"
    files = []
    for name, extra in [
        ("a", "subruns: 1"),
        ("b", "subruns: 2"),
        ("c", "memory: {enabled: false}\nsubruns: 1"),
    ]:
        p = d / f"{name}.yaml"
        p.write_text(f"extends: {base}\nname: {name}\n{extra}\n")
        files.append(p)
    boom = d / "boom.yaml"
    boom.write_text(f"extends: {base}\nname: boom\nsubruns: 1\n")
    return files, boom


@pytest.mark.notebook
def test_local_and_dask_sweeps_agree_and_isolate_failures(params_files, tmp_path):
    files, boom = params_files
    results = {}
    for mode in ("local", "dask"):
        out = tmp_path / mode
        jobs = plan_sweep([*files, boom], (3, 4), out, notebook=PROBE)
        res = run_sweep(
            jobs, workers=2, cluster=None if mode == "local" else "dask", progress=False
        )
        status = {r.condition: r.status for r in res}
        assert status == {"a": "ok", "b": "ok", "c": "ok", "boom": "failed"}, status
        failed = next(r for r in res if r.condition == "boom")
        assert "deliberate failure" in failed.error
        assert (out / "boom" / "sweep_probe.ipynb").is_file()  # kept, with its traceback
        manifest = json.loads((out / "sweep.json").read_text())
        assert len(manifest["results"]) == 4
        results[mode] = {c: _payloads(out / c) for c in ("a", "b", "c")}
        for c in ("a", "b", "c"):
            assert sorted(results[mode][c]) == [f"{c}-seed0003", f"{c}-seed0004"]
    assert results["local"] == results["dask"]


@pytest.mark.notebook
def test_skip_if_done_and_cli_exit_code(params_files, tmp_path, capsys):
    files, boom = params_files
    out = tmp_path / "cli"
    args = [
        "sweep",
        str(files[0]),
        str(boom),
        "--seeds",
        "0..0",
        "--out",
        str(out),
        "--notebook",
        PROBE,
        "--workers",
        "2",
        "--quiet",
    ]
    assert main(args) == 1  # one condition failed
    text = capsys.readouterr().out
    assert "failed" in text and "report:" in text
    index = (out / "index.html").read_text()
    assert "boom" in index and "failed" in index
    assert main(args) == 1
    again = capsys.readouterr().out
    assert "skipped  a" in again  # done jobs are not re-run; failed ones are


def test_parse_seeds():
    assert parse_seeds("2..5") == (2, 5)
    assert parse_seeds("7") == (7, 7)
    for bad in ("5..2", "x", "1..y", "-1..2"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_the_sweep_counts_llm_calls_as_the_kernels_log_them(tmp_path):
    """The sweep's kernels are other processes: their logs tell the sweep's progress each LLM
    call as it is written (a line still being written counts when it ends)."""
    from mbb.batch.sweep import CallWatcher

    job = tmp_path / "llm_negotiators-a"
    log = job / "llm_negotiators-a-seed0000" / "events.jsonl"
    log.parent.mkdir(parents=True)
    seen: list[tuple[int, int]] = []
    w = CallWatcher([job, tmp_path / "not_yet"], lambda c, r: seen.append((c, r)))
    assert w.poll() == (0, 0)
    with log.open("ab") as fh:
        fh.write(b'{"kind":"run_started","seq":0}\n{"kind":"llm_call","seq":1}\n')
        fh.write(b'{"kind":"llm_call","se')  # half a line
        fh.flush()
        assert w.poll() == (1, 0)
        fh.write(b'q":2}\n{"kind":"run_ended","seq":3}\n')
    assert w.poll() == (2, 1)
    other = job / "llm_negotiators-a-seed0001" / "events.jsonl"
    other.parent.mkdir()
    other.write_bytes(b'{"kind":"llm_call","seq":1}\n')
    w.stop()
    assert seen[-1] == (3, 1)
