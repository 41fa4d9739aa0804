"""Faults through the real command line: every expected failure is ONE line on stderr and exit
status 2 (Ctrl-C: one line, 130); nothing is silently accepted, miscounted or mixed; a bug keeps
its traceback. The table below runs each case through `mbb.cli.main` and asserts the exact line;
the signal, lock and notebook cases run `python -m mbb` in subprocesses."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mbb.batch.build import load_params, run_condition
from mbb.batch.outdir import claim
from mbb.cli import BUG_REPORT, build_parser, main
from mbb.core.eventlog import read_lines
from mbb.core.tables import load_tables

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "params" / "base.yaml"
RUN_ID = "base-seed0001"
SMALL = {"subruns": 1}

BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
name: *g
"""


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished run folder (one subrun of base, seed 1) to copy and damage."""
    out = tmp_path_factory.mktemp("finished")
    run_condition(load_params(BASE, SMALL), 1, out)
    return out / RUN_ID


@dataclass
class Case:
    """argv (may use {tmp}), files to write first, what to damage, the expected stderr line."""

    argv: list[str]
    line: str
    rc: int = 2
    files: dict[str, str | bytes] | None = None
    setup: Callable[[Path, Path, pytest.MonkeyPatch], None] | None = None


def _damage(
    edit: Callable[[list[str]], list[str]],
) -> Callable[[Path, Path, pytest.MonkeyPatch], None]:
    """Copy the finished run to {tmp}/c/<run id> and rewrite its events with `edit`."""

    def setup(tmp: Path, run: Path, _mp: pytest.MonkeyPatch) -> None:
        dst = tmp / "c" / RUN_ID
        shutil.copytree(run, dst)
        lines = read_lines(dst / "events.jsonl")
        (dst / "events.jsonl").write_text("".join(x + "\n" for x in edit(lines)))

    return setup


def _dup(lines: list[str]) -> list[str]:
    return [*lines[:8], lines[7], *lines[8:]]


def _foreign(lines: list[str]) -> list[str]:
    d = json.loads(lines[9])
    d["run_id"] = "base-seed0002"
    return [*lines[:9], json.dumps(d, separators=(",", ":")), *lines[10:]]


def _corrupt(lines: list[str]) -> list[str]:
    return [*lines[:5], lines[5][:40], *lines[6:]]


def _bad_field(lines: list[str]) -> list[str]:
    d = json.loads(lines[12])
    d["t"] = -5.0
    return [*lines[:12], json.dumps(d, separators=(",", ":")), *lines[13:]]


def _copied(tmp: Path, run: Path, _mp: pytest.MonkeyPatch) -> None:
    """One run copied into two folders under other names: the first is refused as a folder not
    named by its run (every reader counts a run in the cell its folder's name says)."""
    shutil.copytree(run, tmp / "c" / "a")
    shutil.copytree(run, tmp / "c" / "b")


def _two_conditions(tmp: Path, run: Path, _mp: pytest.MonkeyPatch) -> None:
    """A folder mixed by hand: a run of memory_off copied beside one of base."""
    shutil.copytree(run, tmp / "c" / RUN_ID)
    cond = load_params(ROOT / "params" / "memory_off.yaml", SMALL)
    run_condition(cond, 1, tmp / "c")


def _a_file(tmp: Path, _run: Path, _mp: pytest.MonkeyPatch) -> None:
    (tmp / "afile").write_text("x")


def _read_only(tmp: Path, _run: Path, mp: pytest.MonkeyPatch) -> None:
    real = os.open

    def deny(path, flags, *args, **kw):  # root ignores mode bits: the refusal is mocked
        if str(path).endswith(".mbb.lock"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags, *args, **kw)

    mp.setattr(os, "open", deny)


def _full_disk_meta(tmp: Path, _run: Path, mp: pytest.MonkeyPatch) -> None:
    import mbb.batch.runner

    def full(result, condition, wall_s):
        raise OSError(errno.ENOSPC, "No space left on device", str(result.out_dir / "meta.json"))

    mp.setattr(mbb.batch.runner, "write_meta", full)


def _full_disk_events(tmp: Path, _run: Path, mp: pytest.MonkeyPatch) -> None:
    import mbb.batch.runner

    def full(condition, seed, out):
        raise OSError(errno.ENOSPC, "No space left on device")

    mp.setattr(mbb.batch.runner, "run_condition", full)


def _busy(tmp: Path, _run: Path, mp: pytest.MonkeyPatch) -> None:
    """Another writer holds {tmp}/o: a child process claims it and waits."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from mbb.batch.outdir import claim
        from mbb.batch.build import load_params
        with claim({str(tmp / "o")!r}, load_params({str(BASE)!r})):
            print("held", flush=True)
            time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    mp.setattr(sys.modules[__name__], "_CHILD", child)
    (tmp / "pid").write_text(str(child.pid))


def _holds_base(tmp: Path, _run: Path, _mp: pytest.MonkeyPatch) -> None:
    assert main(["run", str(BASE), "--out", str(tmp / "o"), "--quiet", "--set", "subruns=1"]) == 0


_CHILD: subprocess.Popen | None = None
RUNS = "expected a whole number from 1 to 100000"
LOG = f"{{tmp}}/c/{RUN_ID}/events.jsonl"

CASES: dict[str, Case] = {
    # --- numbers on the command line --------------------------------------------------------
    "runs-0": Case(
        ["run", str(BASE), "--runs", "0"],
        f"error: mbb run: argument --runs: {RUNS}, got '0' (see mbb run --help)",
    ),
    "runs-negative": Case(
        ["run", str(BASE), "--runs", "-3"],
        f"error: mbb run: argument --runs: {RUNS}, got '-3' (see mbb run --help)",
    ),
    "runs-1e9": Case(
        ["run", str(BASE), "--runs", "1e9"],
        f"error: mbb run: argument --runs: {RUNS}, got '1e9' (see mbb run --help)",
    ),
    "runs-too-many": Case(
        ["run", str(BASE), "--runs", "100001"],
        f"error: mbb run: argument --runs: {RUNS}, got '100001' (see mbb run --help)",
    ),
    "processes-0": Case(
        ["run", str(BASE), "--processes", "0"],
        "error: mbb run: argument --processes: expected a whole number from 1 to 64, got '0' "
        "(see mbb run --help)",
    ),
    "processes-text": Case(
        ["run", str(BASE), "--processes", "two"],
        "error: mbb run: argument --processes: expected a whole number from 1 to 64, got 'two' "
        "(see mbb run --help)",
    ),
    "seed-negative": Case(
        ["run", str(BASE), "--seed", "-1"],
        "error: mbb run: argument --seed: expected a whole number from 0 to 2147483647, got '-1' "
        "(see mbb run --help)",
    ),
    "notebook-runs-0": Case(
        ["notebook", "notebooks/run_condition.ipynb", "--params", str(BASE), "--runs", "0"],
        f"error: mbb notebook: argument --runs: {RUNS}, got '0' (see mbb notebook --help)",
    ),
    "sweep-workers-0": Case(
        ["sweep", str(BASE), "--workers", "0"],
        "error: mbb sweep: argument --workers: expected a whole number from 1 to 64, got '0' "
        "(see mbb sweep --help)",
    ),
    "sweep-seeds-huge": Case(
        ["sweep", str(BASE), "--seeds", "0..1000000000"],
        "error: --seeds 0..1000000000: more than 100000 seeds per condition",
    ),
    "unknown-command": Case(
        ["frobnicate"],
        "error: mbb: argument COMMAND: invalid choice: 'frobnicate' (choose from 'study', "
        "'run', 'tables', 'notebook', 'sweep', 'report', 'view', 'resume', 'figures', 'estimate', "
        "'params', 'classify', 'validate-classifier', 'tasks', 'local-llm') (see mbb --help)",
    ),
    # --- params files ---------------------------------------------------------------------
    "yaml-duplicate-key": Case(
        ["run", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: duplicate key 'subruns' at line 3, column 1 (each key may appear "
        "once per mapping)",
        files={"p.yaml": "name: x\nsubruns: 2\nsubruns: 3\n"},
    ),
    "yaml-alias-bomb": Case(
        ["run", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: more than 20000 values with aliases expanded (refused: an alias "
        "bomb?)",
        files={"p.yaml": BOMB},
    ),
    "yaml-many-aliases": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: more than 100 aliases (refused: an alias bomb?)",
        files={"p.yaml": "a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n"},
    ),
    "yaml-10k-deep": Case(
        ["run", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: nested deeper than 32 levels (refused)",
        files={"p.yaml": "name: " + "[" * 10_000 + "]" * 10_000 + "\n"},
    ),
    "yaml-deep-mapping": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: nested deeper than 32 levels (refused)",
        files={"p.yaml": "".join("  " * i + f"k{i}:\n" for i in range(40))},
    ),
    "yaml-recursive-alias": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: a recursive alias (refused)",
        files={"p.yaml": "name: x\ndescription: &a [*a]\n"},
    ),
    "yaml-too-large": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: larger than 1048576 bytes (refused)",
        files={"p.yaml": "name: x\n" + "#" * (1 << 20) + "\n"},
    ),
    "yaml-not-utf8": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: not UTF-8 text (byte 6)",
        files={"p.yaml": b"name: \xff\xfe\n"},
    ),
    "yaml-syntax": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: not valid YAML: expected ',' or '}}', but got ':' (line 3, column "
        "9; while parsing a flow mapping at line 2)",
        files={"p.yaml": "name: bad\nbudget: {credits: 100\ndeadline:\n  minutes: 10\n"},
    ),
    "params-empty": Case(
        ["run", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: empty params file; give at least `name:` (or `extends: base.yaml`)",
        files={"p.yaml": ""},
    ),
    "params-only-comments": Case(
        ["run", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: empty params file; give at least `name:` (or `extends: base.yaml`)",
        files={"p.yaml": "# a condition, some day\n"},
    ),
    "params-missing": Case(
        ["run", "{tmp}/nope.yaml"], "error: {tmp}/nope.yaml: no such params file"
    ),
    "bool-is-not-int": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: invalid condition: subruns: Input should be a valid integer "
        "(got True)",
        files={"p.yaml": "name: x\nsubruns: true\n"},
    ),
    "str-is-not-int": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: invalid condition: subruns: Input should be a valid integer "
        "(got '3')",
        files={"p.yaml": "name: x\nsubruns: '3'\n"},
    ),
    "float-is-not-int": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: invalid condition: budget.credits: Input should be a valid "
        "integer (got 1000.5)",
        files={"p.yaml": "name: x\nbudget: {credits: 1000.5}\n"},
    ),
    "set-bool-is-not-int": Case(
        ["params", str(BASE), "--set", "subruns=true"],
        f"error: {BASE}: invalid condition: subruns (override): Input should be a valid integer "
        "(got True)",
    ),
    "set-without-equals": Case(
        ["params", str(BASE), "--set", "subruns"],
        "error: --set expects KEY=VALUE with a dotted KEY, got 'subruns'",
    ),
    "set-deep-value": Case(
        ["params", str(BASE), "--set", "name=" + "[" * 5000],
        "error: --set name: value '" + "[" * 54 + "...': nested deeper than 32 levels (refused)",
    ),
    "worker-name-slash": Case(
        ["run", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: invalid condition: workers.overrides.W1.name: a worker name is an "
        "identifier: a letter, then letters, digits or _ (at most 32) (got 'a/b')",
        files={"p.yaml": "name: x\nworkers: {count: 2, overrides: {W1: {name: a/b}}}\n"},
    ),
    "newcomer-name-dots": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: invalid condition: population_changes.0.add.0.name: a worker name "
        "is an identifier: a letter, then letters, digits or _ (at most 32) (got '..')",
        files={"p.yaml": "name: x\npopulation_changes: [{subrun: 2, add: [{name: '..'}]}]\n"},
    ),
    "personas-fewer-workers": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: invalid condition: workers: personas lists 5 persona(s) but "
        "count is 3: give one per worker (W1..W3 in order) or one for everyone",
        files={
            "p.yaml": "name: x\nworkers:\n  count: 3\n  personas: [price_first, "
            "deadline_advocate, reciprocator, coalition_builder, shortest_job_advocate]\n"
        },
    ),
    "personas-more-workers": Case(
        ["params", "{tmp}/p.yaml"],
        "error: {tmp}/p.yaml: invalid condition: workers: personas lists 5 persona(s) but "
        "count is 7: give one per worker (W1..W7 in order) or one for everyone",
        files={
            "p.yaml": "name: x\nworkers:\n  count: 7\n  personas: [price_first, "
            "deadline_advocate, reciprocator, coalition_builder, shortest_job_advocate]\n"
        },
    ),
    "cache-mode-typo": Case(
        ["params", str(BASE), "--set", "llm.cache=of"],
        f"error: {BASE}: invalid condition: llm.cache (override): Input should be 'read_write', "
        "'replay' or 'off' (got 'of')",
    ),
    # --- event logs -----------------------------------------------------------------------
    "log-corrupt-line": Case(
        ["tables", "{tmp}/c"],
        f"error: {LOG}:6: not valid JSON (a corrupt log)",
        setup=_damage(_corrupt),
    ),
    "log-non-event-line": Case(
        ["tables", "{tmp}/c"],
        f"error: {LOG}:4: not an mbb event (kind 'hello')",
        setup=_damage(lambda ls: [*ls[:3], '{"kind":"hello","seq":3}', *ls[4:]]),
    ),
    "log-empty-middle-line": Case(
        ["tables", "{tmp}/c"],
        f"error: {LOG}:4: an empty line (a corrupt log)",
        setup=_damage(lambda ls: [*ls[:3], "", *ls[3:]]),
    ),
    "log-duplicated-line": Case(
        ["tables", "{tmp}/c"],
        f"error: {LOG}:9: seq 7 where 8 was expected (a duplicated, missing or reordered line)",
        setup=_damage(_dup),
    ),
    "log-missing-line": Case(
        ["tables", "{tmp}/c"],
        f"error: {LOG}:8: seq 8 where 7 was expected (a duplicated, missing or reordered line)",
        setup=_damage(lambda ls: [*ls[:7], *ls[8:]]),
    ),
    "log-foreign-run-line": Case(
        ["tables", "{tmp}/c"],
        f"error: {LOG}:10: an event of another run ('base-seed0002' in the log of '{RUN_ID}')",
        setup=_damage(_foreign),
    ),
    "log-copied-run": Case(
        ["tables", "{tmp}/c"],
        f"error: {{tmp}}/c/a/events.jsonl: its log is of run '{RUN_ID}', not of a run named as "
        "its folder",
        setup=_copied,
    ),
    "log-two-conditions": Case(
        ["tables", "{tmp}/c"],
        "error: {tmp}/c/memory_off-seed0001/events.jsonl: a run of condition 'memory_off' beside "
        "runs of 'base' (memory.enabled: true in base-seed0001, false in memory_off-seed0001); "
        "tables never mix conditions",
        setup=_two_conditions,
    ),
    "resume-corrupt-middle": Case(
        ["resume", f"{{tmp}}/c/{RUN_ID}", "--params", str(BASE)],
        f"error: {LOG}:6: not valid JSON (a corrupt log)",
        setup=_damage(_corrupt),
    ),
    "resume-invalid-field": Case(
        ["resume", f"{{tmp}}/c/{RUN_ID}", "--params", str(BASE)],
        f"error: {LOG}:13: declared.t: Input should be greater than or equal to 0 (got -5.0)",
        setup=_damage(_bad_field),
    ),
    "resume-no-log": Case(
        ["resume", "{tmp}", "--params", str(BASE)], "error: {tmp}: no events.jsonl to resume from"
    ),
    "tables-empty-folder": Case(
        ["tables", "{tmp}"], "error: {tmp}: no events.jsonl here or in its sub-folders"
    ),
    # --- output folders -------------------------------------------------------------------
    "out-is-a-file": Case(
        ["run", str(BASE), "--out", "{tmp}/afile", "--quiet"],
        "error: {tmp}/afile: is a file, not a folder",
        setup=_a_file,
    ),
    "out-under-a-file": Case(
        ["run", str(BASE), "--out", "{tmp}/afile/o", "--quiet"],
        "error: {tmp}/afile/o: a file is in the way of the folder (Not a directory)",
        setup=_a_file,
    ),
    "out-read-only": Case(
        ["run", str(BASE), "--out", "{tmp}/o", "--quiet"],
        "error: {tmp}/o: not writable (Permission denied)",
        setup=_read_only,
    ),
    "tables-out-is-a-file": Case(
        ["tables", f"{{tmp}}/c/{RUN_ID}", "--out", "{tmp}/afile"],
        "error: {tmp}/afile: is a file, not a folder",
        setup=lambda t, r, m: (_a_file(t, r, m), _damage(lambda ls: ls)(t, r, m)),
    ),
    "full-disk-meta": Case(
        ["run", str(BASE), "--out", "{tmp}/o", "--quiet", "--processes", "1", "--set", "subruns=1"],
        "error: no space left on the device (writing {tmp}/o/base-seed0000/meta.json): free "
        "some space and run again",
        setup=_full_disk_meta,
    ),
    "full-disk-events": Case(
        ["run", str(BASE), "--out", "{tmp}/o", "--quiet", "--processes", "1"],
        "error: no space left on the device: free some space and run again",
        setup=_full_disk_events,
    ),
    "second-writer": Case(
        ["run", str(BASE), "--out", "{tmp}/o", "--quiet"],
        "error: {tmp}/o: another mbb process (pid {pid}) is writing into this folder; wait for it "
        "to finish or choose another --out",
        setup=_busy,
    ),
    "folder-of-another-condition": Case(
        [
            "run",
            str(ROOT / "params" / "memory_off.yaml"),
            "--out",
            "{tmp}/o",
            "--quiet",
            "--set",
            "subruns=1",
        ],
        "error: {tmp}/o holds runs of condition 'base' and this run is 'memory_off' "
        "(memory.enabled: true there, false in this run); a folder never mixes conditions: "
        "choose another --out",
        setup=_holds_base,
    ),
    "folder-same-name-other-params": Case(
        ["run", str(BASE), "--out", "{tmp}/o", "--quiet", "--set", "subruns=2"],
        "error: {tmp}/o holds runs of condition 'base' and this run has other params "
        "(subruns: 1 there, 2 in this run); a folder never mixes conditions: choose another --out",
        setup=_holds_base,
    ),
    "llm-cache-not-sqlite": Case(
        ["run", "{tmp}/p.yaml", "--out", "{tmp}/o", "--quiet"],
        "error: {tmp}/cache.db: the LLM cache is not a usable SQLite database (file is not a "
        "database); move it away or set llm.cache_file to another file",
        files={
            "p.yaml": f"extends: {ROOT}/params/llm_negotiators.yaml\nname: llmc\n"
            "llm: {{cache_file: {tmp}/cache.db}}\n",
            "cache.db": b"this is not SQLite, " * 300,
        },
    ),
    "llm-cache-is-a-folder": Case(
        ["run", "{tmp}/p.yaml", "--out", "{tmp}/o", "--quiet"],
        "error: {tmp}/cache: the LLM cache is not a usable SQLite database (unable to open "
        "database file); move it away or set llm.cache_file to another file",
        files={
            "p.yaml": f"extends: {ROOT}/params/llm_negotiators.yaml\nname: llmc\n"
            "llm: {{cache_file: {tmp}/cache}}\n",
            "cache/x": "",
        },
    ),
    "events-log-is-a-folder": Case(
        ["tables", f"{{tmp}}/c/{RUN_ID}"],
        f"error: {{tmp}}/c/{RUN_ID}: no events.jsonl here or in its sub-folders",
        setup=lambda t, r, m: (t / "c" / RUN_ID / "events.jsonl").mkdir(parents=True),
    ),
    "events-log-not-utf8": Case(
        ["tables", f"{{tmp}}/c/{RUN_ID}"],
        f"error: {LOG}: not UTF-8 text (byte 0)",
        files={f"c/{RUN_ID}/events.jsonl": b"\xff\xfe\n"},
    ),
    # --- notebooks and reports ------------------------------------------------------------
    "notebook-missing": Case(
        ["notebook", "{tmp}/nope.ipynb", "--params", str(BASE)],
        "error: {tmp}/nope.ipynb: no such notebook ({tmp}/nope.ipynb)",
    ),
    "notebook-unknown-parameter": Case(
        [
            "notebook",
            str(ROOT / "tests/fixtures/sweep_probe.ipynb"),
            "--params",
            str(BASE),
            *("-p", "colour", "blue"),
        ],
        "error: sweep_probe.ipynb takes no -p colour (no parameter 'colour'); its parameters "
        "are: out_dir, overrides, params_path, runs, seed",
    ),
    "report-empty-folder": Case(
        ["report", "{tmp}"],
        "error: {tmp}: no executed notebooks here or in its sub-folders, nothing to report "
        "(`mbb notebook compare_conditions --from {tmp}` writes one over its runs, and "
        "`mbb view {tmp}` shows the runs themselves; a study writes its own report)",
    ),
    "report-not-a-folder": Case(["report", "{tmp}/nope"], "error: {tmp}/nope is not a folder"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_is_one_line_and_exit_2(name, tmp_path, finished_run, capsys, monkeypatch):
    case = CASES[name]
    fmt = {"tmp": str(tmp_path)}
    for fname, content in (case.files or {}).items():
        path = tmp_path / fname
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.format(**fmt) if "{tmp}" in content else content)
    try:
        if case.setup is not None:
            case.setup(tmp_path, finished_run, monkeypatch)
        capsys.readouterr()
        if (tmp_path / "pid").is_file():
            fmt["pid"] = (tmp_path / "pid").read_text()
        rc = main([a.format(**fmt) if "{" in a else a for a in case.argv])
    finally:
        if _CHILD is not None:
            _CHILD.kill()
            _CHILD.wait()
    err = capsys.readouterr().err
    assert err.splitlines() == [case.line.format(**fmt)], err
    assert rc == case.rc


def test_the_table_is_broad():
    assert len(CASES) >= 25


# --- documented values and strict types that are accepted ----------------------------------


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("llm: {cache: off}", ("llm", "cache"), "off"),
        ("memory: {enabled: off}", ("memory", "enabled"), False),
        ("memory: {enabled: yes}", ("memory", "enabled"), True),
        ("negotiation: {conversation: no}", ("negotiation", "conversation"), False),
        ("deadline: {minutes: 1e1}", ("deadline", "minutes"), 10.0),
        ("deadline: {minutes: 7}", ("deadline", "minutes"), 7.0),
        (
            "workers: {count: 3}",
            ("workers", "personas"),
            ["price_first", "deadline_advocate", "reciprocator"],
        ),
        ("workers: {count: 3, personas: [quitter]}", ("workers", "personas"), ["quitter"]),
    ],
)
def test_documented_values_load_as_written(tmp_path, text, field, value):
    p = tmp_path / "p.yaml"
    p.write_text(f"name: x\n{text}\n")
    got = load_params(p).model_dump()
    for key in field:
        got = got[key]
    assert got == value


def test_set_cache_off_is_accepted(capsys):
    assert main(["params", str(BASE), "--set", "llm.cache=off"]) == 0
    assert json.loads(capsys.readouterr().out)["llm"]["cache"] == "off"


def test_a_sixth_worker_repeats_the_default_roster_as_stated():
    cond = load_params(BASE, {"workers": {"count": 7}})
    assert [s.persona for s in cond.worker_specs()][5:] == ["price_first", "deadline_advocate"]


def test_load_tables_accepts_a_str(tmp_path):
    out = tmp_path / "o"
    assert main(["run", str(BASE), "--out", str(out), "--quiet", "--set", "subruns=1"]) == 0
    assert load_tables(str(out / "tables"))["rounds"].height > 0
    assert load_tables(str(out))["rounds"].height > 0  # the condition folder: its tables/


def test_every_argument_has_help_text():
    def walk(parser, path):
        for action in parser._actions:
            sub = getattr(action, "_name_parser_map", None)
            if sub:
                for name, p in sub.items():
                    yield from walk(p, f"{path} {name}")
            elif action.dest != "help":
                yield f"{path} {'/'.join(action.option_strings) or action.dest}", action.help

    found = dict(walk(build_parser(), "mbb"))
    assert len(found) > 40
    assert [k for k, text in found.items() if not (text or "").strip()] == []


def test_a_bug_keeps_its_traceback_and_says_so(tmp_path, capsys, monkeypatch):
    import mbb.batch.runner

    def broken(*a, **k):
        raise ZeroDivisionError("an unexpected failure")

    monkeypatch.setattr(mbb.batch.runner, "run_many", broken)
    rc = main(["run", str(BASE), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "Traceback (most recent call last)" in err
    assert "ZeroDivisionError: an unexpected failure" in err
    assert err.splitlines()[-1] == BUG_REPORT


# --- folders: rerun, lock, condition --------------------------------------------------------


def test_the_same_command_keeps_finished_runs(tmp_path, capsys):
    argv = ["run", str(BASE), "--out", str(tmp_path / "o"), "--quiet", "--set", "subruns=1"]
    assert main([*argv, "--runs", "2"]) == 0
    before = (tmp_path / "o" / "base-seed0000" / "events.jsonl").read_text()
    capsys.readouterr()
    assert main([*argv, "--runs", "3"]) == 0
    assert ", 2 already done in" in capsys.readouterr().out
    assert (tmp_path / "o" / "base-seed0000" / "events.jsonl").read_text() == before
    assert load_tables(tmp_path / "o" / "tables")["evaluations"]["run_id"].n_unique() == 3
    assert main([*argv, "--runs", "3", "--force"]) == 0
    assert "already done" not in capsys.readouterr().out


def test_a_folder_is_unlocked_after_its_writer(tmp_path):
    cond = load_params(BASE, SMALL)
    with claim(tmp_path / "o", cond):
        pass
    with claim(tmp_path / "o", cond):  # the lock went with the first claim
        pass


def _run_cmd(out: Path, runs: int, processes: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mbb",
        "run",
        str(BASE),
        "--runs",
        str(runs),
        "--out",
        str(out),
        "--quiet",
        "--processes",
        str(processes),
    ]


@pytest.mark.parametrize("processes", [1, 2])
def test_sigint_stops_cleanly_and_the_same_command_finishes(tmp_path, processes):
    out = tmp_path / "o"
    cmd = _run_cmd(out, 300, processes)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(list(out.glob("*/events.jsonl"))) < 12:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    done = int(lines[0].split()[1])
    assert 0 < done < 300
    assert lines[0] == (
        f"interrupted: {done} of 300 run(s) of 'base' finished, tables in {out}/tables; "
        "the same command finishes the rest"
    )
    tables = load_tables(out / "tables")
    assert tables["evaluations"]["run_id"].n_unique() == done  # only what finished
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"300 run(s) of 'base', {done} already done" in again.stdout
    assert load_tables(out / "tables")["evaluations"]["run_id"].n_unique() == 300
    for d in out.glob("base-seed*"):
        assert json.loads(read_lines(d / "events.jsonl")[-1])["status"] == "completed"


def test_sigint_while_loading_is_one_line(tmp_path, monkeypatch, capsys):
    import mbb.batch.build

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(mbb.batch.build, "load_params", interrupted)
    assert main(["params", str(BASE)]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_two_writers_at_once_one_is_refused(tmp_path):
    out = tmp_path / "o"
    first = subprocess.Popen(_run_cmd(out, 300, 1), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not list(out.glob("*/events.jsonl")):
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        second = subprocess.run(_run_cmd(out, 1, 1), capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert second.stderr == (
            f"error: {out}: another mbb process (pid {first.pid}) is writing into this folder; "
            "wait for it to finish or choose another --out\n"
        )
    finally:
        first.kill()
        first.communicate()


@pytest.mark.slow
def test_notebook_passes_any_parameter_and_hides_the_kernel_warning(tmp_path):
    out = tmp_path / "nb"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mbb",
            "notebook",
            str(ROOT / "tests/fixtures/sweep_probe.ipynb"),
            "--params",
            str(BASE),
            "--out",
            str(out),
            "--set",
            "subruns=1",
            "-p",
            "runs",
            "2",
            "-p",
            "seed",
            "7",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "without encryption" not in proc.stderr
    assert sorted(p.name for p in out.glob("base-seed*")) == ["base-seed0007", "base-seed0008"]
