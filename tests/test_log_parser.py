"""One strict log parser (issue 26, item 5): what the check accepts is exactly what the tables
count. Written as an attacker who read `mbb.core.eventlog` and `mbb.core.tables`: every way a
line could be read one way by the check and another by polars is tried.

- duplicate keys (the check's json took the last, polars the first: a payment counted that the
  check never saw), at the top level, inside an intent, inside the recorded params;
- a wrong type in every column of every table, a number out of range (negative, past int64,
  NaN, a share above 1), an unknown field, another schema version;
- what is accepted is handed on in the writer's form, and polars reads the same values;
- each refusal is one line naming the file and line (`mbb tables` exits 2, no traceback).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from mbb.cli import main
from mbb.core import eventlog
from mbb.core import events as ev
from mbb.core.eventlog import EventLogError, parse_line, read_lines
from mbb.core.tables import _BASE, _KIND_SCHEMAS, tables_from_run_dirs

# --- one sample line of every tabulated kind ---------------------------------------------------
_EXTRA: dict[str, dict[str, Any]] = {
    "llm_call": dict(role="negotiator", phase="declare", model="m", prompt_tokens=10, error="e"),
    "command": dict(
        tool="bash",
        command="ls",
        exit_code=-9,
        runtime=1.5,
        stdout_bytes=3,
        stderr_bytes=0,
        truncated=False,
        killed=True,
        reason="window",
    ),
    "invalid_action": dict(
        phase="declare", field="bid", value=[1, {"a": None}], rule="clamp", detail="d"
    ),
    "withdrawn": dict(reason="gave up"),
}


@pytest.fixture(scope="module")
def samples(base_batch) -> dict[str, str]:
    """kind -> one line mbb wrote (a base run, plus the kinds only LLM, real-task or repaired
    runs write, emitted through the validating writer)."""
    out: dict[str, str] = {}
    for kind, lines in base_batch.by_kind.items():
        # an intent-bearing line where the kind has them (the struct column is the risky one)
        with_intents = [ln for ln in lines if '"intents":[{' in ln]
        out[kind] = (with_intents or lines)[0]
    log = eventlog.EventLog("r")
    log.subrun, log.round = 1, 1
    for kind, fields in _EXTRA.items():
        log.emit(ev.EVENT_KINDS[kind], "W1", **fields)
    out.update(zip(_EXTRA, log.lines, strict=True))
    assert set(_KIND_SCHEMAS) <= set(out), set(_KIND_SCHEMAS) - set(out)
    return out


def _line(d: dict[str, Any]) -> str:
    return json.dumps(d, separators=(",", ":"))


def _polars_row(line: str, kind: str) -> dict[str, Any]:
    schema = {**_BASE, **_KIND_SCHEMAS[kind]}
    return pl.read_ndjson(io.BytesIO(line.encode()), schema=schema).row(0, named=True)


def _same(checked: Any, tabled: Any) -> bool:
    """The value the check validated equals what polars put in the table."""
    if isinstance(checked, list) and isinstance(tabled, list):
        return len(checked) == len(tabled) and all(map(_same, checked, tabled))
    if isinstance(checked, dict) and isinstance(tabled, dict):  # a struct: its typed keys
        return all(_same(checked.get(k), v) for k, v in tabled.items())
    return (checked == tabled and type(checked) is not bool) or checked is tabled


_HOSTILE: list[Any] = [
    "x",
    "",
    0,
    -1,
    1.5,
    -0.5,
    2**63,
    -(2**63) - 1,
    10**30,
    True,
    None,
    [],
    {},
    ["a"],
    [1],
    [None],
    [{"kind": 1}],
    [{"kind": "k", "value": "v"}],
    [{"kind": "k", "value": 1}],
    [{"kind": "k", "peer": ["W1"]}],
    [{"worker": "W1"}],
]


def test_the_check_and_polars_agree_on_every_column_of_every_table(samples) -> None:
    """For each tabulated kind, each column, each hostile value: either the parser refuses the
    line, or polars reads its accepted form without error and to the very values the check
    validated. Nothing passes the check that the tables would read differently or choke on."""
    tried = refused = 0
    for kind, columns in _KIND_SCHEMAS.items():
        base = json.loads(samples[kind])
        for column in [*_BASE, *columns]:
            for value in _HOSTILE:
                d = {**base, column: value}
                tried += 1
                try:
                    fields, accepted = parse_line(_line(d))
                except ValueError:
                    refused += 1
                    continue
                row = _polars_row(accepted, kind)
                for col in row:
                    assert _same(fields.get(col), row[col]), (kind, column, value, col)
    assert tried > 1500 and refused > tried // 2


@pytest.mark.parametrize(
    ("where", "mutate"),
    [
        ("top", lambda s: s[:-1] + ',"amount":100000}'),
        ("kind", lambda s: s[:-1] + ',"kind":"message"}'),
        ("first", lambda s: '{"kind":"payment","amount":0,' + s[len('{"kind":"payment",') :]),
    ],
    ids=["last-wins", "second-kind", "first-wins"],
)
def test_a_duplicate_key_is_refused(samples, where, mutate) -> None:
    """The reported attack: a payment line with `amount` twice. Whichever copy a reader keeps,
    the line is refused before any reader counts it."""
    line = mutate(samples["payment"])
    with pytest.raises(ValueError, match="given twice in one object"):
        parse_line(line)


def test_a_duplicate_key_inside_a_nested_object_is_refused(samples) -> None:
    d = json.loads(samples["declared"])
    assert d["intents"], "the sample carries intents"
    dup = _line(d).replace('"intents":[{', '"intents":[{"kind":"forged",', 1)
    with pytest.raises(ValueError, match="'kind' is given twice"):
        parse_line(dup)
    started = samples["run_started"]
    dup = started.replace('"params":{', '"params":{"name":"forged",', 1)
    with pytest.raises(ValueError, match="'name' is given twice"):
        parse_line(dup)


@pytest.mark.parametrize(
    ("kind", "field", "value", "message"),
    [
        ("payment", "amount", "5", "valid integer"),
        ("payment", "amount", 5.0, "valid integer"),
        ("payment", "amount", -5, "greater than or equal to 0"),
        ("payment", "amount", 2**63, "less than or equal to 9223372036854775807"),
        ("declared", "bid", True, "valid integer"),
        ("window_ended", "progress", 1.5, "less than or equal to 1"),
        ("evaluation", "score", -0.1, "greater than or equal to 0"),
        ("payment", "subrun", "__proto__", "valid integer"),
        ("payment", "worker", {"toString": 1}, "valid string"),
        ("message", "text", ["a"], "valid string"),
        ("payment", "v", 2, "schema version 2, not 1"),
        ("payment", "surprise", 1, "Extra inputs are not permitted"),
    ],
)
def test_wrong_types_and_out_of_range_values_are_refused(
    samples, kind, field, value, message
) -> None:
    d = json.loads(samples[kind])
    d[field] = value
    with pytest.raises(ValueError, match=message):
        parse_line(_line(d))


def test_not_a_number_is_refused(samples) -> None:
    line = samples["payment"].replace('"t":', '"t":NaN,"_":', 1)
    with pytest.raises(ValueError):
        parse_line(line)
    d = json.loads(samples["window_ended"])
    with pytest.raises(ValueError, match="finite number"):
        parse_line(_line(d).replace(f'"used":{d["used"]}', '"used":Infinity'))


def test_another_version_is_said_before_the_fields_it_lacks(samples) -> None:
    """An older event's fields differ because it is older: its version is the reason given,
    as an `OtherVersion` (the viewer lists such lines together)."""
    d = json.loads(samples["payment"])
    d["v"], d["surprise"] = 0, 1
    del d["amount"]
    with pytest.raises(eventlog.OtherVersion, match="schema version 0, not 1") as caught:
        parse_line(_line(d))
    assert caught.value.version == "0"


def test_a_line_nested_too_deeply_is_refused_in_one_line(samples) -> None:
    """The parser stops at 200 levels (pydantic's bound, far above mbb's 4) without Python
    recursion; the reason says so rather than 'not valid JSON'."""
    with pytest.raises(ValueError, match=r"^nested too deeply to be an mbb event"):
        parse_line("[" * 100_000 + "]" * 100_000)
    d = json.loads(samples["payment"])
    for depth, refused in ((150, False), (250, True)):
        line = _line({**d, "x": 0}).replace('"x":0', '"x":' + "[" * depth + "]" * depth)
        with pytest.raises(ValueError, match="nested too deeply" if refused else "Extra inputs"):
            parse_line(line)


def test_an_equivalent_line_is_handed_on_in_the_writers_form(samples) -> None:
    line = samples["payment"]
    spaced = json.dumps(dict(reversed(json.loads(line).items())), indent=None)
    fields, accepted = parse_line(spaced)
    assert accepted == line and fields["amount"] == json.loads(line)["amount"]
    for sample in samples.values():  # mbb's own lines come back unchanged
        assert parse_line(sample)[1] == sample


def _write_run(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _tampered(base_batch, tmp_path: Path, change) -> tuple[Path, int]:
    """A copy of one base run with one payment line changed: (its folder, the line number)."""
    src = base_batch.run_dirs[0] / "events.jsonl"
    lines = src.read_text(encoding="utf-8").splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith('{"kind":"payment"'))
    lines[i] = change(lines[i])
    run = _write_run(tmp_path / "out" / base_batch.run_ids[0], lines)
    return run, i + 1


def test_tables_refuse_a_forged_payment_with_file_and_line(base_batch, tmp_path) -> None:
    run, lineno = _tampered(base_batch, tmp_path, lambda s: s[:-1] + ',"amount":100000}')
    with pytest.raises(EventLogError) as info:
        tables_from_run_dirs([run])
    assert f"{run / 'events.jsonl'}:{lineno}:" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: re.sub(r'"amount":\d+', '"amount":"many"', s),
        lambda s: re.sub(r'"amount":\d+', '"amount":1e400', s),
        lambda s: s[:-1] + ',"amount":-3}',
        lambda s: re.sub(r'"subrun":\d+', '"subrun":"__proto__"', s),
    ],
    ids=["string", "huge-float", "duplicate-negative", "proto"],
)
def test_mbb_tables_says_one_line_never_a_traceback(base_batch, tmp_path, capsys, change) -> None:
    """A wrong field type used to reach polars and end in a traceback ("this is a bug")."""
    run, lineno = _tampered(base_batch, tmp_path, change)
    assert main(["tables", str(run.parent)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"events.jsonl:{lineno}:" in err
    assert "Traceback" not in err and "bug" not in err
    assert not (run.parent / "tables").exists()


def test_a_skip_done_batch_never_keeps_a_tampered_run(base, base_batch, tmp_path) -> None:
    """`mbb run` keeps finished runs it finds (verified logs): a run folder whose log was
    tampered with is not finished, so it is run again instead of counted."""
    from mbb.batch.runner import finished_log

    run, _ = _tampered(base_batch, tmp_path, lambda s: s[:-1] + ',"amount":100000}')
    assert finished_log(run) is None
    assert finished_log(base_batch.run_dirs[0]) == read_lines(
        base_batch.run_dirs[0] / "events.jsonl"
    )


def test_resume_keeps_the_raw_bytes_of_an_equivalent_log(base_batch, tmp_path) -> None:
    """A log re-written in another JSON form (reordered keys) is read in the writer's form,
    and resuming it truncates at the raw bytes, not at the re-serialized length."""
    src = (base_batch.run_dirs[0] / "events.jsonl").read_text(encoding="utf-8").splitlines()
    lines = [json.dumps(json.loads(ln)) for ln in src[:20]]  # spaces after separators
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n" + '{"kind":"par', encoding="utf-8")
    log = eventlog.EventLog(json.loads(src[0])["run_id"], path, resume=True)
    log.close()
    assert path.read_text(encoding="utf-8") == "\n".join(lines) + "\n"
    assert log._recorded == src[:20]


def test_a_log_that_is_a_pipe_or_a_link_is_refused_not_waited_on(tmp_path, samples) -> None:
    """`mbb tables` on a folder whose events.jsonl is a named pipe waited for ever (a red
    team's find, in the viewer first); a link could point at any file of the reader's."""
    import os

    pipe = tmp_path / "p" / "events.jsonl"
    pipe.parent.mkdir()
    os.mkfifo(pipe)
    with pytest.raises(EventLogError, match=r"events\.jsonl: not a regular file"):
        read_lines(pipe)
    real = tmp_path / "real.jsonl"
    real.write_text(samples["payment"] + "\n")
    link = tmp_path / "l" / "events.jsonl"
    link.parent.mkdir()
    link.symlink_to(real)
    with pytest.raises(EventLogError, match=r"symbolic link or a pipe"):
        read_lines(link)


def test_a_log_to_write_that_is_a_pipe_is_refused_not_waited_on(tmp_path) -> None:
    """A named pipe left as a run's events.jsonl held `mbb run` and a study's resume for ever
    (opening a pipe to write waits for a reader): it is refused in one line."""
    import os
    import signal

    def ring(*_: object) -> None:
        raise TimeoutError("still waiting on the pipe after 20 s")

    pipe = tmp_path / "r" / "events.jsonl"
    pipe.parent.mkdir()
    os.mkfifo(pipe)
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(20)  # the old code blocked here for ever: fail instead
    try:
        for resume in (False, True):
            with pytest.raises(EventLogError, match=r"events\.jsonl: not a regular file"):
                eventlog.EventLog("r", pipe, resume=resume)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    log = eventlog.EventLog("r", tmp_path / "ok" / "events.jsonl")  # a file is truncated
    log.close()


def test_a_log_larger_than_mbb_writes_is_refused_not_read_whole(tmp_path) -> None:
    """An 8 GB sparse events.jsonl in a received folder was read whole by `mbb view` (a
    MemoryError, reported as a bug); past MAX_LOG_BYTES a log is refused in one line."""
    big = tmp_path / "r" / "events.jsonl"
    big.parent.mkdir()
    with big.open("wb") as fh:
        fh.truncate(eventlog.MAX_LOG_BYTES + 1)  # sparse: no disk used
    with pytest.raises(EventLogError, match=r"1\.0 GiB, larger than any log mbb writes"):
        read_lines(big)


def test_a_line_longer_than_any_event_of_mbbs_is_refused_with_its_line(
    base_batch, tmp_path, capsys
) -> None:
    """A red team's find: one 50 MiB message text inside the 1 GiB log cap cost `mbb view`
    138 s (200 MiB: a MemoryError), and the tables counted it. Past MAX_LINE_CHARS a line is
    refused with its file and line, by the tables and the viewer alike; the longest text a
    condition may ask for (TEXT_LIMIT_MAX characters, each written as \\uXXXX) still fits."""
    from mbb.batch.viewer import read_run

    src = base_batch.run_dirs[0] / "events.jsonl"
    lines = src.read_text(encoding="utf-8").splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith('{"kind":"message"'))
    d = json.loads(lines[i])
    lines[i] = _line({**d, "text": "x" * eventlog.MAX_LINE_CHARS})
    run = _write_run(tmp_path / "out" / base_batch.run_ids[0], lines)
    assert main(["tables", str(run.parent)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"events.jsonl:{i + 1}: a line of 1,048," in err, err
    with pytest.raises(ValueError, match="longer than any event mbb writes"):
        parse_line(lines[i])
    shown = read_run(run)
    assert any(p.startswith(f"line {i + 1}: a line of") for p in shown.problems), shown.problems
    assert len(shown.events) == len(lines) - 1
    # the longest text a condition may ask for, of the characters JSON writes longest, is read
    text = "\U0001f600" * eventlog.TEXT_LIMIT_MAX
    longest = _line({**d, "text": text})  # ensure_ascii: "\ud83d\ude00", 12 characters each
    assert len(longest) > 12 * eventlog.TEXT_LIMIT_MAX
    assert parse_line(longest)[0]["text"] == text
