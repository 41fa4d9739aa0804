"""A run folder is data, never a command (issue 26, item 1).

Written as an attacker who read `mbb.batch.resume`, `mbb.core.eventlog` and `mbb.batch.runner`
and sends a colleague a run folder: a forged `run_started` line naming another key variable, its
own endpoint and a cache path of its choosing; `..` in names and paths; symbolic links where
mbb writes. What must hold: no request reaches the folder's endpoint unless the user said so,
no environment variable is read that the user did not name, nothing is written outside the
folder (or the user's own configured paths), and each refusal is one line (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mbb.batch.build import load_params, run_condition
from mbb.batch.resume import ResumeRefused, resume_run
from mbb.cli import main
from mbb.core import eventlog
from mbb.core import events as ev
from mbb.testing.testserver import FakeOpenAIServer, schema_responder

STOLEN = "ghp_STOLEN-token-never-to-be-sent-0123456789"
TOKEN_ENV = "GITHUB_TOKEN"


@pytest.fixture
def endpoint():
    """The attacker's endpoint: it answers anything, and records what it was sent."""
    with FakeOpenAIServer(schema_responder, models=("m",)) as srv:
        yield srv


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, STOLEN)


def _llm_params(root: Path, url: str, cache: Path, key_env: str | None, **extra: Any) -> dict:
    over = {
        "name": "shared",
        "subruns": 1,
        "workers": {"count": 2, "negotiator": "llm", "model": "m"},
        "models": {
            "m": {
                "model": "m",
                "base_url": url,
                "api_key_env": key_env,
                "structured": "json_object_schema",
                "timeout_s": 5.0,
                "max_retries": 0,
            }
        },
        "llm": {"cache": "read_write", "cache_file": str(cache)},
        **extra,
    }
    return load_params(root / "params" / "llm_negotiators.yaml", over).model_dump(mode="json")


def _forge(out: Path, params: dict, seed: int = 1, run_id: str | None = None) -> Path:
    """A run folder holding only a `run_started` line with `params` (what the red team sent)."""
    from mbb.agents.backends import modeled_estimate_log_sd
    from mbb.batch.build import run_id_of

    workers: list[dict] = []
    if run_id is None:
        cond = load_params(params)
        run_id = run_id_of(cond, seed)
        workers = [w.model_dump(mode="json") for w in cond.worker_specs(seed)]
        for w, spec in zip(workers, cond.worker_specs(seed), strict=True):
            if spec.solver == "modeled":  # as the arena records it (mbb.agents.modeled, F-1)
                w["solver_settings"] = {"estimate_log_sd": modeled_estimate_log_sd(spec)}
    run = out / run_id
    log = eventlog.EventLog(run_id, run / "events.jsonl")
    log.emit(
        ev.RunStarted,
        condition=params["name"],
        seed=seed,
        params=params,
        workers=workers,
        provenance={},
    )
    log.close()
    return run


def _sent_anything(srv: FakeOpenAIServer) -> bool:
    return bool(srv.requests)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# --- the reported attack: a forged run_started chooses key variable, endpoint and cache ------
def test_resume_without_the_users_params_is_refused(root, tmp_path, endpoint, token, capsys):
    cache = tmp_path / "elsewhere" / "planted.sqlite"
    run = _forge(tmp_path / "shared", _llm_params(root, endpoint.url, cache, TOKEN_ENV))
    assert main(["resume", str(run)]) == 2
    err = _one_line_error(capsys)
    assert "--params" in err and "--trust-folder" in err
    assert not _sent_anything(endpoint) and not cache.exists() and not cache.parent.exists()


def test_trusting_a_folder_does_not_let_it_choose_the_key_variable(
    root, tmp_path, endpoint, token, capsys
):
    cache = tmp_path / "shared" / "cache.sqlite"  # inside: only the key is in question
    run = _forge(tmp_path / "shared", _llm_params(root, endpoint.url, cache, TOKEN_ENV))
    assert main(["resume", str(run), "--trust-folder"]) == 2
    err = _one_line_error(capsys)
    assert f"--key-env {TOKEN_ENV}" in err and STOLEN not in err
    assert not _sent_anything(endpoint) and not cache.exists()
    # another name allowed is not this one
    assert main(["resume", str(run), "--trust-folder", "--key-env", "OPENAI_API_KEY"]) == 2
    _one_line_error(capsys)
    assert not _sent_anything(endpoint)


@pytest.mark.parametrize(
    "cache",
    [
        lambda tmp: tmp / "elsewhere" / "planted.sqlite",
        lambda tmp: tmp / "shared" / ".." / "planted.sqlite",
        lambda tmp: Path("planted-relative.sqlite"),  # relative: the user's current folder
    ],
    ids=["absolute", "dot-dot", "relative"],
)
def test_trusting_a_folder_does_not_let_it_choose_where_the_cache_is(
    root, tmp_path, endpoint, token, capsys, cache, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    path = cache(tmp_path)
    run = _forge(tmp_path / "shared", _llm_params(root, endpoint.url, path, TOKEN_ENV))
    rc = main(["resume", str(run), "--trust-folder", "--key-env", TOKEN_ENV])
    assert rc == 2
    err = _one_line_error(capsys)
    assert "outside the output folder" in err
    assert not _sent_anything(endpoint)
    assert not (tmp_path / "planted.sqlite").exists() and not (tmp_path / "elsewhere").exists()


def test_a_trusted_folder_with_named_key_and_inside_cache_runs(root, tmp_path, endpoint, token):
    """The control: the refusals above are what stopped those runs. Trusted, with the key
    variable named and the cache inside the folder, the recorded condition runs."""
    cache = tmp_path / "shared" / "cache.sqlite"
    run = _forge(tmp_path / "shared", _llm_params(root, endpoint.url, cache, TOKEN_ENV))
    out = resume_run(run, trust_folder=True, key_envs=[TOKEN_ENV])
    assert out.status == "resumed" and endpoint.completions and cache.is_file()


def test_the_users_params_must_equal_the_recorded_ones(root, tmp_path, endpoint, token, capsys):
    """The user's own params file resumes its own runs; a folder recording other params (here
    the attacker's endpoint and key variable) is refused, naming the first differing field."""
    mine_url = "http://127.0.0.1:9/v1"  # the user's endpoint (never reached here)
    cache = tmp_path / "mine.sqlite"
    mine = _llm_params(root, mine_url, cache, "OPENAI_API_KEY")
    (tmp_path / "mine.yaml").write_text(json.dumps(mine))  # JSON is YAML
    evil = {**mine["models"]["m"], "base_url": endpoint.url, "api_key_env": TOKEN_ENV}
    forged = {**mine, "models": {**mine["models"], "m": evil}}
    run = _forge(tmp_path / "shared", forged)
    assert main(["resume", str(run), "--params", str(tmp_path / "mine.yaml")]) == 2
    err = _one_line_error(capsys)
    assert "models.m.api_key_env" in err or "models.m.base_url" in err
    assert "in the log" in err and "in your params" in err
    assert not _sent_anything(endpoint) and not cache.exists()


def test_a_forged_params_key_given_twice_is_refused(root, tmp_path, endpoint, token, capsys):
    """The parser refuses the line before anything reads it: a benign key variable first (for a
    reader keeping the first), the stolen one second (for one keeping the last)."""
    cache = tmp_path / "shared" / "cache.sqlite"
    run = _forge(tmp_path / "shared", _llm_params(root, endpoint.url, cache, "OPENAI_API_KEY"))
    path = run / "events.jsonl"
    text = path.read_text().replace(
        '"api_key_env":"OPENAI_API_KEY"',
        f'"api_key_env":"OPENAI_API_KEY","api_key_env":"{TOKEN_ENV}"',
    )
    path.write_text(text)
    assert main(["resume", str(run), "--trust-folder", "--key-env", "OPENAI_API_KEY"]) == 2
    assert "given twice" in _one_line_error(capsys)
    assert not _sent_anything(endpoint)


@pytest.mark.parametrize("name", ["../../escaped", "..", "shared"])
def test_a_recorded_name_cannot_place_a_run_outside(root, tmp_path, capsys, name):
    """A recorded condition name with `../` would make the run id a path out of the output
    folder: it is not a valid name; a valid one must still name this very folder."""
    base = load_params(root / "params" / "base.yaml", {"subruns": 1})
    params = {**base.model_dump(mode="json"), "name": name}
    run = _forge(tmp_path / "shared", params, run_id="innocent-seed0001")
    assert main(["resume", str(run), "--trust-folder"]) == 2
    err = _one_line_error(capsys)
    assert "not a valid condition" in err or "not this folder" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        ["shared", "innocent-seed0001", "events.jsonl"]
    )


# --- symbolic links where mbb writes --------------------------------------------------------
@pytest.fixture
def finished(root, tmp_path):
    cond = load_params(root / "params" / "base.yaml", {"subruns": 1, "name": "sym"})
    result = run_condition(cond, 1, tmp_path / "out")
    return cond, result.out_dir


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


def test_a_linked_log_is_never_written_through(finished, tmp_path) -> None:
    cond, run = finished
    victim = _victim(tmp_path)
    (run / "events.jsonl").unlink()
    (run / "events.jsonl").symlink_to(victim)
    with pytest.raises((ResumeRefused, eventlog.EventLogError), match="symbolic link"):
        resume_run(run, cond)
    with pytest.raises(eventlog.EventLogError, match="symbolic link"):  # a fresh run too
        run_condition(cond, 1, run.parent)
    assert victim.read_text() == "precious\n"


def test_a_linked_run_folder_is_never_written_into(finished, tmp_path) -> None:
    """`mbb run --out SHARED` where SHARED holds a run folder that is a link elsewhere."""
    from mbb.batch.runner import run_many

    cond, run = finished
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "events.jsonl").write_text("precious\n")
    other = run.parent / "sym-seed0002"
    other.symlink_to(elsewhere, target_is_directory=True)
    batch = run_many(cond, seed=2, runs=1, out_dir=run.parent)
    assert "symbolic link" in batch.failed["sym-seed0002"]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["events.jsonl"]
    assert (elsewhere / "events.jsonl").read_text() == "precious\n"


def test_a_linked_meta_file_is_replaced_not_followed(finished, tmp_path) -> None:
    from mbb.batch.runner import finished_log, run_many

    cond, run = finished
    victim = _victim(tmp_path)
    (run / "meta.json").symlink_to(victim)
    assert finished_log(run) is not None  # the meta file is rebuilt from the log
    assert not (run / "meta.json").is_symlink() and victim.read_text() == "precious\n"
    dangling = tmp_path / "created-by-a-link.json"
    (run / "meta.json").unlink()
    (run / "meta.json").symlink_to(dangling)
    finished_log(run)
    assert not dangling.exists()
    (run / "meta.json").unlink()
    (run / "meta.json").symlink_to(victim)
    run_many(cond, seed=1, runs=1, out_dir=run.parent, skip_done=False).check()  # write_meta
    assert not (run / "meta.json").is_symlink() and victim.read_text() == "precious\n"


def test_a_linked_resource_folder_is_refused(finished, tmp_path) -> None:
    cond, run = finished
    (tmp_path / "workspaces-elsewhere").mkdir()
    (run / "resource").symlink_to(tmp_path / "workspaces-elsewhere")
    with pytest.raises(ResumeRefused, match="symbolic link"):
        resume_run(run, cond)


def test_tables_are_never_written_through_a_link(finished, tmp_path, capsys) -> None:
    _, run = finished
    target = tmp_path / "elsewhere-tables"
    target.mkdir()
    (run.parent / "tables").symlink_to(target, target_is_directory=True)
    assert main(["tables", str(run.parent)]) == 2
    assert "symbolic link" in _one_line_error(capsys)
    assert list(target.iterdir()) == []


def test_a_linked_lock_or_condition_record_is_never_written_through(finished, tmp_path) -> None:
    """The output folder's lock is truncated to hold the writer's pid, and its condition record
    rewritten: planted as links in a shared folder, they would clobber their targets."""
    from mbb.batch.outdir import OutputError, claim

    cond, run = finished
    victim = _victim(tmp_path)
    (run.parent / ".mbb.lock").unlink(missing_ok=True)
    (run.parent / ".mbb.lock").symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        resume_run(run, cond)
    assert victim.read_text() == "precious\n"
    (run.parent / ".mbb.lock").unlink()
    (run.parent / "condition.json").unlink(missing_ok=True)
    dangling = tmp_path / "made-by-a-link.json"
    (run.parent / "condition.json").symlink_to(dangling)
    with claim(run.parent, cond):
        pass
    assert not dangling.exists() and not (run.parent / "condition.json").is_symlink()


# --- JSON nested past the parser's recursion --------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000


def test_safejson_says_too_deep_as_a_value_error() -> None:
    from mbb.core import safejson

    with pytest.raises(ValueError, match="nested too deeply"):
        safejson.loads(DEEP)
    with pytest.raises(ValueError, match="nested too deeply"):
        safejson.loads(DEEP.encode())
    assert safejson.loads('{"a": [1]}') == {"a": [1]}


def test_a_deeply_nested_record_file_is_corrupt_input_not_a_crash(finished, tmp_path, capsys):
    """A shared folder whose meta.json or condition.json is "[[[[..." 100,000 deep: `json.loads`
    raised RecursionError (not a ValueError) out of `mbb view`, `load_runs` and `mbb run --out`.
    Now the viewer and `load_runs` read the run from its log (meta.json is ignored, as when it
    is not an object), and `mbb run` refuses the condition record in one line."""
    from mbb.analysis.runs import load_runs

    _cond, run = finished
    (run / "meta.json").write_text(DEEP)
    assert main(["view", str(run.parent), "--out", str(tmp_path / "v")]) == 0
    tables = load_runs([run.parent])
    assert tables["runs"]["run_id"].to_list() == [run.name]
    (run.parent / "condition.json").write_text(DEEP)
    capsys.readouterr()
    code = main(["run", "base", "--runs", "1", "--set", "subruns=1", "--set", "name=sym",
                 "--out", str(run.parent), "--quiet"])  # fmt: skip
    assert code == 2
    assert _one_line_error(capsys).endswith("condition.json: not a condition record (corrupt)\n")


def test_a_huge_sparse_meta_file_is_refused_not_read(finished, tmp_path, capsys):
    """A red team's find: a 3 GB sparse meta.json (0 bytes on disk, and in a tarball) beside a
    real log was read whole by `mbb view` and `load_runs`, which died with a MemoryError. Now
    it is not read: both say the run is invalid, with the file's size and mbb's cap as the
    reason (a meta.json may mark a run invalid, so an unread one cannot leave it valid)."""
    import os

    from mbb.analysis.runs import load_runs
    from mbb.batch.viewer import read_run
    from mbb.core import safejson

    _cond, run = finished
    meta = run / "meta.json"
    meta.unlink(missing_ok=True)
    with open(meta, "wb") as fh:
        os.truncate(fh.fileno(), 3 << 30)
    with pytest.raises(safejson.TooLarge, match=r"meta.json: 3,221,225,472 bytes, larger"):
        safejson.read_object(meta)
    tables = load_runs([run.parent], include_invalid=True)
    (reason,) = tables["runs"]["invalid_reason"].to_list()
    assert reason.startswith("invalid: meta.json 3,221,225,472 bytes, larger than any record")
    assert read_run(run).meta["valid"] is False
    assert main(["view", str(run.parent), "--out", str(tmp_path / "v")]) == 0
    assert "Traceback" not in capsys.readouterr().err
    # the cap is read on the open file: a file that grows past it after the check is refused
    small = tmp_path / "small.json"
    small.write_text('{"a": "' + "x" * 100 + '"}')
    with pytest.raises(safejson.TooLarge, match="at most 50 bytes read"):
        safejson.read_text(small, cap=50)
    assert safejson.read_text(small, cap=200).startswith('{"a"')


@pytest.mark.parametrize("first", ["[1]", "1" * 5000, '{"kind": "run_started", "params": 5}'])
def test_a_first_line_that_is_no_event_is_neither_kept_nor_a_crash(finished, first, capsys):
    """The readers of a log's first line (the foreign-run guard, `recorded_conditions`) took
    any JSON for an object (a list raised AttributeError) and missed json's plain ValueError
    past its digit limit. Such a run records no condition: `recorded_conditions` skips it,
    and `mbb run` replaces it (the log does not check; nothing of a condition is lost)."""
    from mbb.analysis.runs import recorded_conditions

    _cond, run = finished
    log = run / "events.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([first, *lines[1:]]) + "\n")
    assert recorded_conditions([run.parent]) == {}
    (run.parent / "condition.json").unlink(missing_ok=True)  # the guard then reads the log
    code = main(["run", "base", "--runs", "2", "--set", "subruns=1", "--set", "name=sym",
                 "--out", str(run.parent), "--quiet"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert eventlog.read_lines(log)[0].startswith('{"kind":"run_started"')


def test_recorded_params_this_mbb_cannot_read_are_one_line(finished) -> None:
    from mbb.analysis.runs import recorded_conditions
    from mbb.params import ParamsError

    _cond, run = finished
    log = run / "events.jsonl"
    lines = log.read_text().splitlines()
    started = json.loads(lines[0])
    started["params"]["subruns"] = "many"
    log.write_text("\n".join([json.dumps(started), *lines[1:]]) + "\n")
    with pytest.raises(ParamsError, match=r"events\.jsonl:1: the recorded params are not a "):
        recorded_conditions([run.parent])


# --- a folder's tables are a cache anyone could rewrite --------------------------------------
def test_conditions_are_compared_from_their_logs_not_their_tables(root, tmp_path) -> None:
    """A colleague's condition folder whose `tables/evaluations.parquet` says every task was
    completed with full marks: the comparison reads the runs' logs, not the forged table."""
    import polars as pl

    from mbb.analysis.compare import load_conditions
    from mbb.core.tables import tables_from_run_dirs, write_tables

    cond = load_params(root / "params" / "base.yaml", {"subruns": 1, "name": "forged"})
    run = run_condition(cond, 1, tmp_path / "out").out_dir
    out = tmp_path / "out"
    write_tables(tables_from_run_dirs([run]), out / "tables")
    honest = load_conditions([out])["evaluations"]
    forged = pl.read_parquet(out / "tables" / "evaluations.parquet").with_columns(
        pl.lit(1.0).alias("score"), pl.lit("completed").alias("outcome")
    )
    forged.write_parquet(out / "tables" / "evaluations.parquet")
    read = load_conditions([out])["evaluations"]
    assert read["score"].to_list() == honest["score"].to_list()
    assert read["score"].to_list() != [1.0] * read.height


def test_a_table_not_as_mbb_writes_it_is_one_line(root, tmp_path) -> None:
    """A parquet table whose column has another type (a forged or foreign file) is refused
    with one line naming the file and the column, not a polars error deep in an analysis."""
    import polars as pl

    from mbb.core.tables import load_tables, tables_from_run_dirs, write_tables

    cond = load_params(root / "params" / "base.yaml", {"subruns": 1, "name": "typed"})
    run = run_condition(cond, 1, tmp_path / "out").out_dir
    out = tmp_path / "out"
    write_tables(tables_from_run_dirs([run]), out / "tables")
    path = out / "tables" / "evaluations.parquet"
    pl.read_parquet(path).with_columns(pl.col("score").cast(pl.String)).write_parquet(path)
    with pytest.raises(
        ValueError,
        match=r"evaluations\.parquet: not a table as mbb writes it \(column 'score' is String",
    ) as exc:
        load_tables(out)
    assert "\n" not in str(exc.value)
    (out / "tables" / "rounds.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"rounds\.parquet: not a parquet table"):
        load_tables(out)
