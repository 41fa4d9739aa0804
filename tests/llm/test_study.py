"""`mbb study`: a study file expanded into cells, run on loopback endpoints, resumed, analysed
without re-running anything; an endpoint that goes down stops its runs loudly; bad input is
one line naming the field and what is valid."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from mbb.batch.study import StudyError, load_study, run_study
from mbb.cli import main
from mbb.core.eventlog import comparable, read_lines
from mbb.testing.stub import StubRouter
from mbb.testing.testserver import FakeOpenAIServer, Reply

PRICE = "{prompt: 0.15, completion: 0.6, cached_prompt: 0.075, date: 2026-11-01, source: test}"


def study_file(tmp_path: Path, body: str, name: str = "s") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def small(tmp_path: Path, models: str, **extra: str) -> Path:
    fields = {
        "conditions": "[base, memory_off]",
        "roles": "[negotiators]",
        "seeds": "0..1",
        "overrides": "{subruns: 1, workers: {count: 3}, negotiation: {max_turns: 1}}",
        "notebooks": "[]",
        **extra,
    }
    body = f"name: s\nout: {tmp_path / 'out'}\n" + "".join(f"{k}: {v}\n" for k, v in fields.items())
    return study_file(tmp_path, body + "models:\n" + textwrap.indent(textwrap.dedent(models), "  "))


def test_bad_study_files_get_one_line_naming_the_field(tmp_path):
    dead = "base_url: 'http://127.0.0.1:9/v1', api_key_env: null"
    models = f"a: {{model: m, {dead}, price: {PRICE}}}"
    cases = {
        "conditions: [nosuch]": "conditions: no condition named 'nosuch'",
        "roles: [judges]": "unknown role 'judges'; valid: negotiators, solvers, both",
        "roles: [{name: mix, roster: [a, zealot, quitter]}]": (
            "roles.mix.roster: unknown ['zealot']; a seat names a model of the study (a) or a "
            "persona"
        ),
        "seeds: 5..2": "seeds: need 0 <= A <= B",
        "caps: {max_cost_usd: 10}\nnotes: x": "notes: unknown field; did you mean `notebooks`?",
        # a typo is named with the field it most resembles
        "seed: 0..1": "seed: unknown field; did you mean `seeds`? (allowed here:",
        "failures: {stop_aftr: 2}": "failures.stop_aftr: unknown field; did you mean `stop_after`?",
        # refused when read, not after every run (a newcomer's misspelled notebook)
        "notebooks: [compare_condition]": "notebooks: no notebook named 'compare_condition'",
        # the study's overrides are at fault, not mbb's params file (a newcomer's typo)
        "overrides: {negotiaton: {max_turns: 1}}": ("overrides (the study's, applied to"),
    }
    for extra, needle in cases.items():
        key = extra.partition(": ")[0]
        path = study_file(
            tmp_path,
            f"name: s\nmodels: {{{models}}}\n{extra}\n"
            + ("" if key == "conditions" else "conditions: [base]\n"),
        )
        with pytest.raises(StudyError) as err:
            load_study(path)
        msg = str(err.value)
        assert "\n" not in msg and needle in msg, (extra, msg)
        if key == "overrides":
            assert "negotiaton (override): unknown field; did you mean `negotiation`?" in msg
    typo = f"a: {{model: m, {dead}, price: {PRICE}, concurency: 2}}"
    with pytest.raises(StudyError, match=r"models\.a\.concurency: .*did you mean `concurrency`"):
        load_study(study_file(tmp_path, f"name: s\nconditions: [base]\nmodels: {{{typo}}}\n"))
    bad_preset = "a: {model: o4-mini, preset: openai_reasoning, temperature: 0.5, price: unpriced}"
    with pytest.raises(StudyError, match=r"models\.a: .*temperature"):
        load_study(study_file(tmp_path, f"name: s\nconditions: [base]\nmodels: {{{bad_preset}}}\n"))
    no_price = f"a: {{model: m, {dead}}}"
    with pytest.raises(StudyError, match=r"models\.a\.price: give the model's price"):
        load_study(study_file(tmp_path, f"name: s\nconditions: [base]\nmodels: {{{no_price}}}\n"))
    unpriced = (
        "a: {model: m, base_url: 'http://127.0.0.1:9/v1', api_key_env: null, price: unpriced}"
    )
    with pytest.raises(StudyError, match=r"caps\.max_cost_usd: the models \['a'\] have no price"):
        load_study(
            study_file(
                tmp_path,
                f"name: s\nconditions: [base]\nmodels: {{{unpriced}}}\ncaps: {{max_cost_usd: 5}}\n",
            )
        )


def test_a_params_file_given_as_a_study_says_so(tmp_path) -> None:
    """`mbb study params/base.yaml` had said only `conditions: Field required`."""
    params = tmp_path / "mine.yaml"
    params.write_text("extends: base\nsubruns: 2\n")
    with pytest.raises(StudyError) as err:
        load_study(params)
    assert str(err.value) == (
        f"{params}: a condition's params file, not a study file: run it with `mbb run FILE`, "
        "or name it under `conditions:` in a study file"
    )


def test_a_stub_study_runs_resumes_and_refuses_another_study_in_its_folder(tmp_path):
    path = small(
        tmp_path,
        f"""
        a: {{model: gpt-a, preset: openai, tool_protocol: native, price: {PRICE}}}
        b: {{model: local-b, preset: vllm, base_url: 'http://127.0.0.1:9/v1', api_key_env: null,
            price: unpriced}}
        c: {{model: gemini-c, preset: gemini, price: {PRICE}}}
        """,
    )
    study = load_study(path, stub=True)
    assert [c.label for c in study.cells] == [
        f"{cond}.negotiators-{m}" for cond in ("base", "memory_off") for m in "abc"
    ]
    out = run_study(study, progress=False, report=False)
    assert (out.completed, out.stopped, out.failed, out.status) == (12, 0, 0, 0)
    record = json.loads((study.out / "study.json").read_text())
    assert len(record["runs"]) == 12 and all(r["valid"] for r in record["runs"].values())
    assert record["models"]["b"]["price"] is None and record["models"]["a"]["price"]["date"]
    logs = sorted(study.out.glob("runs/*/*/events.jsonl"))
    stamps = {p: p.stat().st_mtime_ns for p in logs}
    again = run_study(load_study(path, stub=True), progress=False, report=False)
    assert (again.done_before, again.completed, again.calls) == (12, 0, 0)
    assert {p: p.stat().st_mtime_ns for p in logs} == stamps  # nothing re-run
    # a finished run is judged from its log when the study resumes: its calls failing in the
    # log made no difference to the record and the summary ("0 invalid", valid: True)
    log = logs[0]
    failed = [
        json.dumps({**json.loads(x), "error": "HTTP 500"}) if '"llm_call"' in x else x
        for x in log.read_text().splitlines()
    ]
    log.write_text("\n".join(failed) + "\n")
    judged = run_study(load_study(path, stub=True), progress=False, report=False)
    assert (judged.done_before, judged.invalid) == (12, 1)
    (bad,) = [
        r
        for r in json.loads((study.out / "study.json").read_text())["runs"].values()
        if not r["valid"]
    ]
    assert bad["failed_calls"] == bad["llm_calls"] > 0
    # the record is written as a fresh file: a link planted where it is written is replaced
    import os

    victim = tmp_path / "victim"
    victim.write_text("mine")
    for pid in range(os.getpid(), os.getpid() + 3):
        (study.out / f".study.json.{pid}").symlink_to(victim)
    run_study(load_study(path, stub=True), progress=False, report=False)
    assert victim.read_text() == "mine"
    # a run made again on another stub port is the same condition: its cell's tables used to
    # refuse it ("a run of condition ... beside runs of ...: base_url"), exit 2
    import shutil

    shutil.rmtree(logs[1].parent)
    redo = run_study(load_study(path, stub=True), progress=False, report=False)
    assert (redo.completed, redo.failed) == (1, 0)
    other = study_file(tmp_path, path.read_text().replace("name: s", "name: other"), "o")
    with pytest.raises(StudyError, match="holds study 's'"):
        run_study(load_study(other, stub=True), progress=False, report=False)
    # a study record that is not one (a colleague's folder, a crash mid-write) is refused in
    # one line: a list had raised AttributeError, "[[[[..." RecursionError
    record_text = (study.out / "study.json").read_text()
    for corrupt in ("[1]", '{"runs": 5}', "[" * 100_000 + "]" * 100_000):
        (study.out / "study.json").write_text(corrupt)
        with pytest.raises(StudyError, match=r"study\.json: not a study record \(corrupt\)"):
            run_study(load_study(path, stub=True), progress=False, report=False)
    (study.out / "study.json").write_text(record_text)


def test_slots_to_fill_in_are_refused_except_in_a_stub_study_which_never_passes_for_real(
    tmp_path, monkeypatch
):
    """A study file ships slots to fill in: loading it says what a slot wants; with --stub
    the slot is a stub model (`stub-<slot>`), the default folder is `<name>-stub`, and a stub
    folder is refused to the real study (and the other way round)."""
    monkeypatch.chdir(tmp_path)
    path = study_file(
        tmp_path,
        """
        name: s
        conditions: [base]
        seeds: 0..0
        overrides: {subruns: 1, workers: {count: 3}, negotiation: {max_turns: 1}}
        notebooks: []
        models:
          frontier: {fill_in: "a frontier model", preset: gemini}
          known: {model: gpt-k, preset: openai, price: unpriced}
        """,
    )
    with pytest.raises(StudyError, match=r"models\.frontier: a slot to fill in \(a frontier"):
        load_study(path)
    stub = load_study(path, stub=True)
    assert stub.out == tmp_path / "outputs" / "studies" / "s-stub"
    assert {c.model for c in stub.configs.values()} == {"stub-frontier", "stub-known"}
    assert stub.configs["frontier"].preset == "gemini"
    assert run_study(stub, progress=False, report=False).completed == 2
    filled = study_file(
        tmp_path,
        path.read_text().replace(
            '{fill_in: "a frontier model", preset: gemini}',
            "{model: g-1, preset: gemini, price: unpriced}",
        ),
        "filled",
    )
    real = load_study(filled, out=stub.out)
    assert real.fingerprint() != load_study(filled, stub=True, out=stub.out).fingerprint()
    with pytest.raises(StudyError, match="holds study 's' with other cells"):
        run_study(real, progress=False, report=False)


def test_an_endpoint_that_goes_down_stops_its_runs_and_the_study_resumes(tmp_path):
    """Two models on one loopback server; one of them starts failing mid-study (HTTP 503 on
    every attempt): its runs stop (recorded, resumable) with one line, the other's finish;
    with it back, the same study finishes every run, each log checked as it is resumed."""

    class Flaky:
        """The stub, but model `flaky-m` fails once `down` is set (after 30 of its calls)."""

        def __init__(self, router: StubRouter) -> None:
            self.router, self.flaky_calls, self.down = router, 0, False

        def __call__(self, body):
            if body.get("model") == "flaky-m":
                self.flaky_calls += 1
                self.down = self.down or self.flaky_calls > 30
                if self.down:
                    return Reply.error(503, "overloaded")
            return self.router(body)

    with FakeOpenAIServer(models=("up-m", "flaky-m")) as server:
        loopback = (
            f"preset: vllm, base_url: '{server.url}', api_key_env: null, max_retries: 1, "
            "price: unpriced"
        )
        path = small(
            tmp_path,
            f"""
            up: {{model: up-m, {loopback}}}
            flaky: {{model: flaky-m, {loopback}}}
            """,
            failures="{stop_after: 2}",
        )
        study = load_study(path)
        flaky = Flaky(StubRouter(study.configs))
        server.responder = flaky
        said: list[str] = []
        first = run_study(study, progress=False, report=False, say=said.append)
        assert first.stopped > 0 and first.status == 3 and first.failed == 0
        # every call the endpoint failed is counted (two attempts each), also those that opened
        # the breaker or failed in flight beside it
        assert first.failed_calls == (flaky.flaky_calls - 30) // 2 > 0
        assert list(first.endpoints_down) == [f"flaky-m at {server.url}"]
        assert len(said) == 1 and said[0].startswith(f"stopped: endpoint flaky-m at {server.url}")
        runs = json.loads((study.out / "study.json").read_text())["runs"]
        assert all(r["status"] == "completed" for k, r in runs.items() if "-up-" in k)
        assert any(r["status"] == "stopped" for k, r in runs.items() if "-flaky-" in k)
        flaky.down, flaky.flaky_calls = False, -(10**9)  # back up
        second = run_study(load_study(path), progress=False, report=False)
    assert second.status == 0 and second.completed == first.stopped
    for log in study.out.glob("runs/*/*/events.jsonl"):
        assert json.loads(read_lines(log)[-1])["status"] == "completed"


def test_a_study_on_an_endpoint_that_reports_no_usage_says_so_at_the_end(tmp_path, capsys):
    """An endpoint whose answers carry no token counts (some servers leave `usage` out): the
    study finishes, and its last lines say how many answers had none and that their tokens
    and cost are unknown; the report's spend table reads "unknown", never $0."""
    with FakeOpenAIServer(models=("quiet-m",)) as server:
        loopback = f"preset: vllm, base_url: '{server.url}', api_key_env: null, price: {PRICE}"
        path = small(tmp_path, f"quiet: {{model: quiet-m, {loopback}}}")
        router = StubRouter(load_study(path).configs)

        def no_usage(body):
            reply = router(body)
            reply.body.pop("usage", None)
            return reply

        server.responder = no_usage
        assert main(["study", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("usage: ")]
    calls = int(line.split()[1])
    assert calls > 0 and "their tokens and cost are unknown" in line, out
    report = (tmp_path / "out" / "index.html").read_text()
    assert f"unknown ({calls} calls without usage)" in report


def test_a_study_on_an_endpoint_answering_json_nested_too_deeply_marks_its_runs_invalid(
    tmp_path, capsys
):
    """Every answer a JSON array nested 10,000 deep (valid JSON that Python's parser cannot
    read): once a RecursionError escaped the readers and the runs, all defaults, counted as
    valid; now each answer is a failed parse, repaired, and the runs are marked invalid."""
    with FakeOpenAIServer(models=("deep-m",)) as server:
        loopback = f"preset: vllm, base_url: '{server.url}', api_key_env: null, price: {PRICE}"
        path = small(tmp_path, f"deep: {{model: deep-m, {loopback}}}", seeds="0..0")
        server.responder = lambda body: Reply.completion("[" * 10_000 + "]" * 10_000)
        assert main(["study", str(path), "--quiet"]) == 0
    assert "2 invalid" in capsys.readouterr().out
    metas = [json.loads(p.read_text()) for p in (tmp_path / "out").glob("runs/*/*/meta.json")]
    assert len(metas) == 2 and not any(m["valid"] for m in metas)
    assert all(m["validity"]["repaired_calls"] > 0 for m in metas)
    # their calls were paid for: the report's spend covers them (it showed no spend at all)
    report = (tmp_path / "out" / "index.html").read_text()
    assert "LLM spend by model" in report
    assert "2 invalid run(s), left out of the comparison, included" in report


def test_the_command_runs_a_stub_study_and_its_report_reads_the_runs(tmp_path, capsys, monkeypatch):
    path = small(
        tmp_path,
        f"a: {{model: gpt-a, preset: openai, price: {PRICE}}}",
        notebooks="[compare_conditions, token_audit]",
    )
    assert main(["study", str(path), "--stub", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "4 runs in 2 cells" in out and "report:" in out
    root = tmp_path / "out"
    for name in ("compare_conditions", "token_audit"):
        assert (root / "notebooks" / f"{name}.html").is_file()
    index = (root / "index.html").read_text()
    assert "base.negotiators-a" in index and "memory_off.negotiators-a" in index
    # the study's name heads it: its folder's name (`out`, a `--out`) need not say it
    assert "<p>study <b>s</b> in <code>out</code> — " in index and "<title>s — mbb" in index
    # the study's analyses have a table of their own (they sat under a condition's columns,
    # a row of blanks each)
    analyses = index.split("<h2>Analyses</h2>")[1].split("</table>")[0]
    assert "compare_conditions" in analyses and "token_audit" in analyses
    assert "completion" not in analyses and "—" not in analyses
    assert index.count(">compare_conditions</a>") == 1
    assert (root / "viewer" / "index.html").is_file()
    import mbb.batch.notebooks as notebooks

    ran: list[str] = []

    def fail_one(name, out_dir, params):  # the notebooks ran for real above; here only said
        ran.append(name)
        if name == "token_audit":
            raise ValueError("no run to analyse")

    monkeypatch.setattr(notebooks, "execute_notebook", fail_one)
    # run again with nothing changed: the report is kept, no notebook runs (each ran again)
    page = (root / "index.html").stat().st_mtime_ns
    assert main(["study", str(path), "--stub", "--quiet"]) == 0
    out = capsys.readouterr()
    assert ran == [] and (root / "index.html").stat().st_mtime_ns == page
    assert "analysis: up to date" in out.err and "--reanalyse" in out.err
    # a notebook that fails is not a finished study: exit 4 and a line naming it (it exited 0)
    assert main(["study", str(path), "--stub", "--quiet", "--reanalyse"]) == 4
    out = capsys.readouterr()
    assert ran == ["compare_conditions", "token_audit"]
    assert "4 done before, 0 completed now" in out.out
    assert "analysis: 1 notebook(s) failed (token_audit); the report lists them" in out.out
    assert "notebook token_audit failed: no run to analyse" in out.err
    # after a failure the same command analyses again, mended or not
    assert main(["study", str(path), "--stub", "--quiet"]) == 4
    assert ran[2:] == ["compare_conditions", "token_audit"]
    capsys.readouterr()
    # so does a change to what the analyses read: here a run's log
    monkeypatch.setattr(
        notebooks, "execute_notebook", lambda name, out_dir, params: ran.append(name)
    )
    log = next(root.glob("runs/*/*/events.jsonl"))
    log.write_text(log.read_text())
    assert main(["study", str(path), "--stub"]) == 0
    err = capsys.readouterr().err
    assert "analysis: up to date" not in err and len(ran) == 6
    assert "analysis: notebook 1 of 2, compare_conditions" in err
    assert "analysis: notebook 2 of 2, token_audit" in err
    assert "analysis: writing the report and viewer" in err
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 6
    # a record that is a link (a received folder's, pointing anywhere) is not trusted; nor a
    # deleted page
    record = root / "analysis.json"
    (tmp_path / "elsewhere.json").write_text(record.read_text())
    record.unlink()
    record.symlink_to(tmp_path / "elsewhere.json")
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 8
    assert not record.is_symlink()  # replaced, its target untouched
    (root / "viewer" / "index.html").unlink()
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 10
    assert (root / "viewer" / "index.html").is_file()
    # anything the report wrote, deleted (the comparison's CSVs were: kept, links to nothing)
    shutil.rmtree(root / "compare")
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 12
    assert any((root / "compare").iterdir())
    # a run copied under the study's folder outside runs/ (the report reads it: it was kept)
    shutil.copytree(root / "runs" / "base.negotiators-a", root / "extra" / "late")
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 14
    shutil.rmtree(root / "extra")
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 16
    # the same folder named another way is the same folder
    monkeypatch.chdir(tmp_path)
    assert main(["study", str(path), "--stub", "--quiet", "--out", "out/runs/../../out"]) == 0
    assert len(ran) == 16
    # a record too large to be mbb's is not read; one that is a folder is said, not a crash
    record.write_text(record.read_text() + " " * (1 << 17))
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 18
    record.unlink()
    record.mkdir()
    assert main(["study", str(path), "--stub", "--quiet"]) == 0 and len(ran) == 20
    assert "analysis not recorded: " in capsys.readouterr().err


@pytest.mark.slow
def test_three_providers_two_conditions_two_seeds_both_roles_then_every_notebook(tmp_path):
    """The issue's target: 3 emulated providers x 2 paper conditions x 2 seeds x both roles
    (LLM negotiators; LLM solvers on real tasks) from one call, then every analysis notebook
    and the report read the study's runs without running anything again."""
    import sqlite3

    from mbb.batch.study import DEFAULT_NOTEBOOKS, analyse_study

    path = small(
        tmp_path,
        f"""
        gpt: {{model: gpt-e, preset: openai, tool_protocol: native, price: {PRICE}}}
        gemini: {{model: gemini-e, preset: gemini, price: {PRICE}}}
        local: {{model: local-e, preset: vllm, base_url: 'http://127.0.0.1:9/v1',
            api_key_env: null, price: unpriced}}
        """,
        roles="[negotiators, solvers]",
        notebooks=f"[{', '.join([*DEFAULT_NOTEBOOKS, 'mechanisms'])}]",
        overrides="{subruns: 1, workers: {count: 2}, negotiation: {max_turns: 1}, "
        "deadline: {minutes: 3}, tasks: {suite: [rev, tac]}, "
        "llm: {solver: {max_turns_per_window: 2, planning_turns: 1}}}",
    )
    study = load_study(path, stub=True)
    assert len(study.cells) == 12 and study.runs == 24
    out = run_study(study, progress=False, report=False)
    assert (out.completed, out.stopped, out.failed) == (24, 0, 0), out.errors
    logs = sorted(study.out.glob("runs/*/*/events.jsonl"))
    assert len(logs) == 24
    stamps = {p: p.stat().st_mtime_ns for p in logs}
    cache = study.out / "llm_cache.sqlite"
    with sqlite3.connect(cache) as db:
        entries = db.execute("SELECT count(*) FROM responses").fetchone()[0]
    said: list[str] = []
    index, failed = analyse_study(study, say=said.append)
    assert said == [] and failed == []  # every notebook ran
    for name in [*DEFAULT_NOTEBOOKS, "mechanisms"]:
        assert (study.out / "notebooks" / f"{name}.html").is_file(), name
    assert {p: p.stat().st_mtime_ns for p in logs} == stamps
    assert sorted(study.out.glob("runs/*/*/events.jsonl")) == logs  # no new run anywhere
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == entries
    page = index.read_text()
    for cell in study.cells:
        assert cell.label in page


def test_shared_limits_are_split_only_among_the_processes_that_call_the_endpoint(tmp_path):
    from mbb.batch.study import _endpoint_key, _share_limits

    path = small(
        tmp_path,
        f"""
        a: {{model: a-e, preset: openai, concurrency: 8, rpm: 600, price: {PRICE}}}
        b: {{model: b-e, preset: openai, concurrency: 8, rpm: 600, price: {PRICE}}}
        """,
    )
    study = load_study(path)
    key_a = _endpoint_key(study.configs["a"].model_dump())
    shared = _share_limits(study, {key_a: 2})
    assert (shared.configs["a"].concurrency, shared.configs["a"].rpm) == (4, 300)
    assert (shared.configs["b"].concurrency, shared.configs["b"].rpm) == (8, 600)
    for cell in shared.cells:
        cfg = cell.condition.models[cell.model]
        assert cfg.concurrency == (4 if cell.model == "a" else 8)


@pytest.mark.slow
def test_a_study_spread_over_a_dask_cluster_makes_the_same_runs(tmp_path):
    """--cluster dask: the cells go to two worker processes; every run is made once, its log
    is the one a single process makes (same events), and the study record lists them all."""
    models = f"a: {{model: a-e, preset: openai, price: {PRICE}}}\n"
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    here = small(tmp_path / "here", models, seeds="0..0")
    there = small(tmp_path / "there", models, seeds="0..0")
    one = run_study(load_study(here, stub=True), progress=False, report=False)
    spread = run_study(
        load_study(there, stub=True), progress=False, report=False, cluster="dask", workers=2
    )
    assert (one.completed, spread.completed, spread.failed) == (2, 2, 0), spread.errors
    for log in sorted((tmp_path / "here" / "out").glob("runs/*/*/events.jsonl")):
        twin = tmp_path / "there" / log.relative_to(tmp_path / "here")
        assert same_content(log) == same_content(twin)
    record = json.loads((tmp_path / "there" / "out" / "study.json").read_text())
    assert len(record["runs"]) == 2 and record["status"] == "done"


def same_content(log: Path) -> list[str]:
    """A log's comparable lines: `comparable` leaves out what the provider's prompt cache
    decides (its cached tokens and so the cost), and each Dask worker has its own stub, as each
    process of a real provider has its own cache."""
    return [comparable(line) for line in read_lines(log)]


def test_local_llm_refuses_a_study_whose_models_are_not_at_its_server(tmp_path, capsys):
    path = small(tmp_path, f"a: {{model: gpt-a, preset: openai, price: {PRICE}}}")
    assert main(["local-llm", "--study", str(path), "--port", "8099"]) == 2
    err = capsys.readouterr().err
    assert "models ['a'] are not at http://127.0.0.1:8099/v1" in err


def test_the_shipped_studies_load_and_say_which_slots_to_fill_in():
    with pytest.raises(StudyError, match=r"models\.frontier_glm_new: a slot to fill in"):
        load_study("scarce")
    stub = load_study("scarce", stub=True)
    assert len(stub.configs) == 8 and len(stub.seeds) == 5
    assert len(stub.cells) == 8 * 9 and stub.out.name == "scarce-stub"
    assert all(c.role == "both" for c in stub.cells)
    smoke = load_study("local_smoke")
    assert smoke.configs["smollm2"].base_url == "http://127.0.0.1:8080/v1"


def test_a_study_estimate_dry_runs_once_per_condition_and_preset_and_prices_each_cell(
    tmp_path, monkeypatch, capsys
):
    """Cells of one condition on models of one preset send the same requests: one dry run
    stands for them, each priced and limited as its own model; another preset or another
    reasoning effort is another dry run. The command prints a row per cell."""
    import mbb.batch.estimate as est
    from mbb.batch.study import estimate_study

    path = small(
        tmp_path,
        f"""
        a: {{model: gpt-a, preset: openai, price: {PRICE}}}
        b: {{model: gpt-b, preset: openai, concurrency: 2, price: unpriced}}
        c: {{model: o4-mini, preset: openai_reasoning, reasoning_effort: low, price: {PRICE}}}
        d: {{model: o4-mini, preset: openai_reasoning, reasoning_effort: high, price: {PRICE}}}
        """,
    )
    study = load_study(path)
    sig = {c.label: est.request_signature(c.condition) for c in study.cells}
    assert sig["base.negotiators-a"] == sig["base.negotiators-b"]
    assert len({sig[f"base.negotiators-{m}"] for m in "acd"}) == 3
    assert sig["base.negotiators-a"] != sig["memory_off.negotiators-a"]
    made = []
    real = est.emulated_calls
    monkeypatch.setattr(
        est, "emulated_calls", lambda c, *a, **k: made.append(c) or real(c, *a, **k)
    )
    rows = estimate_study(study)
    assert len(made) == 6 and len(rows) == 8  # 2 conditions x 3 request shapes; 8 cells
    by = {(r.condition, r.model): r for r in rows}
    a, b = by[("base.negotiators", "a")], by[("base.negotiators", "b")]
    assert a.calls == b.calls > 0 and a.prompt_tokens == b.prompt_tokens
    assert a.cost_usd is not None and a.cost_usd > 0 and b.cost_usd is None
    assert (a.concurrency, b.concurrency) == (8, 2) and a.runs == 2
    low, high = by[("base.negotiators", "c")], by[("base.negotiators", "d")]
    assert 0 < low.reasoning_tokens < high.reasoning_tokens
    assert main(["study", str(path), "--estimate", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "unpriced" in out and "wall time of the study" in out
    assert not (tmp_path / "out").exists()  # an estimate writes nothing


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM", "SIGTERM in the background"])
def test_ctrl_c_stops_a_study_with_one_line_and_the_same_command_finishes_it(tmp_path, stop):
    """Ctrl-C, and SIGTERM as a batch scheduler sends it (which ended a study with no line
    and no record), stop a study with one line; the same command finishes it. A study started
    in a script's background inherits SIGINT ignored: SIGTERM stops it all the same (it
    swallowed it, and the study spent on to its end)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    path = small(tmp_path, f"a: {{model: gpt-a, preset: openai, price: {PRICE}}}", seeds="0..7")
    cmd = [sys.executable, "-m", "mbb", "study", str(path), "--stub", "--quiet", "--no-report"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    background = stop.endswith("in the background")  # as `mbb study F &` in a script
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if background else None,
    )
    out = tmp_path / "out"
    deadline = time.monotonic() + 120
    while not any(out.glob("runs/*/*/events.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(getattr(signal, stop.split()[0]))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().count("\n") == 0, err  # one line, no traceback (the stub's neither)
    assert err.startswith("interrupted: ") and "run the same command again" in err
    record = json.loads((out / "study.json").read_text())
    assert record["status"] == "interrupted"
    assert "interrupted" in {r["status"] for r in record["runs"].values()}
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    record = json.loads((out / "study.json").read_text())
    assert record["status"] == "done" and len(record["runs"]) == 16
    assert {r["status"] for r in record["runs"].values()} == {"completed"}


def test_a_failed_analysis_notebook_says_its_error_line_and_where_its_copy_is(
    tmp_path, monkeypatch
):
    """papermill's error opens with a banner and a traceback; the study's line gives the
    exception itself (`ename: evalue`) and the executed copy's path, not 300 characters of
    banner."""
    import mbb.batch.notebooks as notebooks
    import mbb.batch.report as report
    from mbb.batch.study import analyse_study

    class Failed(Exception):
        ename, evalue = "ValueError", "no run to analyse (conditions=None); left out: 4 invalid"

    def fail(name, out_dir, params):
        raise Failed("-" * 75 + '\nException encountered at "In [3]":\n' + "-" * 75)

    monkeypatch.setattr(notebooks, "execute_notebook", fail)
    monkeypatch.setattr(report, "build_report", lambda out, quiet, study_name: out / "index.html")
    study = load_study("local_smoke", stub=True, out=tmp_path / "s")
    study.out.mkdir()  # as run_study leaves it
    said: list[str] = []
    _, failed = analyse_study(study, say=said.append)
    assert len(said) == len(study.spec.notebooks) > 0
    assert failed == list(study.spec.notebooks)
    first = study.spec.notebooks[0]
    assert said[0] == (
        f"notebook {first} failed: ValueError: no run to analyse (conditions=None); left out: "
        f"4 invalid (the executed copy: {tmp_path / 's' / 'notebooks' / f'{first}.ipynb'})"
    )


def test_unset_key_variables_are_all_named_once_each_with_how_to_export_them(tmp_path, monkeypatch):
    """A variable set in the shell but not exported is not in mbb's environment: the line says
    to export it, and names every unset variable with the models that need it (it named one
    model, then '(and 1 more)')."""
    from mbb.batch.study import preflight

    path = small(
        tmp_path,
        """
        a: {model: gpt-a, preset: openai, api_key_env: KEY_A, price: unpriced}
        b: {model: gpt-b, preset: openai, api_key_env: KEY_A, price: unpriced}
        c: {model: gem-c, preset: gemini, api_key_env: KEY_C, price: unpriced}
        """,
    )
    study = load_study(path)
    assert preflight(study, environ={"KEY_C": "", "KEY_A": " "}) == [
        "environment variables KEY_A (models a: gpt-a, b: gpt-b) and KEY_C (model c: gem-c) not "
        "set, or empty, for mbb: a shell variable must be exported (`export KEY_A=...; export "
        "KEY_C=...` in the shell that runs mbb)"
    ]
    monkeypatch.setenv("KEY_A", "set")
    monkeypatch.delenv("KEY_C", raising=False)
    with pytest.raises(StudyError, match=r"^environment variable KEY_C \(model c: gem-c\) not "):
        run_study(load_study(path), progress=False, report=False)


def test_an_output_folder_spelled_through_a_missing_folder_is_one_folder(tmp_path, monkeypatch):
    """`--out x/../out` with no `x` (a red team's find): the first run made a stray `x`, and
    once it was gone the kernel could not open `x/../out/...`, so the study found none of its
    finished runs and made them all again."""
    path = small(tmp_path, f"a: {{model: gpt-a, preset: openai, price: {PRICE}}}")
    monkeypatch.chdir(tmp_path)
    first = run_study(load_study(path, stub=True, out="x/../o"), progress=False, report=False)
    assert first.completed == 4 and not (tmp_path / "x").exists()
    again = run_study(load_study(path, stub=True, out="y/../o"), progress=False, report=False)
    assert (again.done_before, again.completed) == (4, 0)


@pytest.mark.parametrize(
    ("price", "needle"),
    [
        ("{prompt: 1e300, completion: 1}", "price.prompt: Input should be less than or equal to"),
        ("{prompt: .inf, completion: 1}", "price.prompt: Input should be a finite number"),
    ],
)
def test_an_implausible_price_is_refused_when_the_study_is_read(tmp_path, price, needle):
    """A red team's finds: 1e300 ran the study to its end and broke mbb's own log (a cost over
    i64), and `.inf` read as 'unpriced'."""
    dead = "base_url: 'http://127.0.0.1:9/v1', api_key_env: null"
    path = study_file(
        tmp_path,
        f"name: s\nconditions: [base]\nmodels: {{a: {{model: m, {dead}, price: {price}}}}}\n",
    )
    with pytest.raises(StudyError) as err:
        load_study(path)
    assert "\n" not in str(err.value) and needle in str(err.value)


def test_a_study_says_when_it_retries_an_endpoint(tmp_path, capsys):
    """An endpoint holding its answers kept the bar still for minutes with no word (a red
    team's find: 4 min at timeout_s 20, ~27 min at the default 120): a failed attempt about to
    be retried is said, at most one line per endpoint every 30 s, counting the rest."""
    with FakeOpenAIServer(models=("flaky-m",)) as server:
        loopback = f"preset: vllm, base_url: '{server.url}', api_key_env: null, price: {PRICE}"
        path = small(tmp_path, f"flaky: {{model: flaky-m, {loopback}}}", seeds="0..0")
        router = StubRouter(load_study(path).configs)
        seen = [0]

        def every_fifth_fails(body):
            seen[0] += 1
            return Reply.error(500, "busy") if seen[0] % 5 == 3 else router(body)

        server.responder = every_fifth_fails
        assert main(["study", str(path), "--no-report"]) == 0
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("retrying flaky-m at ")]
    assert len(lines) == 1, err  # many retries, one line within 30 s
    assert "InternalServerError (HTTP 500)" in lines[0] and "attempt 1 of 5 failed" in lines[0]
