"""A readable transcript of one round: declarations, public posts, private messages, ballots,
and the resulting schedule, as self-contained HTML (shows live, in a saved notebook and in the
HTML export, because it is plain `text/html` with inline styles)."""

from __future__ import annotations

import html
from collections.abc import Mapping

import polars as pl

from mbb.viz.table import share_text
from mbb.viz.theme import WORKER_PALETTE, worker_key

__all__ = ["Transcript", "busiest_round", "round_transcript_html"]

_CSS = (
    "<style>.mbb-tr{font-family:system-ui,sans-serif;font-size:13px;max-width:980px}"
    ".mbb-tr h4{margin:.8em 0 .3em}.mbb-tr table{border-collapse:collapse}"
    ".mbb-tr td,.mbb-tr th{border:1px solid #ddd;padding:3px 7px;vertical-align:top;"
    "text-align:left}.mbb-tr .w{font-weight:600;padding:0 .35em;border-radius:3px;color:#fff}"
    ".mbb-tr .priv{background:#fff6e0}.mbb-tr .lab{color:#777;font-size:11px}"
    ".mbb-tr .rev{color:#a05a00}</style>"
)


def _chip(worker: str, colours: Mapping[str, str]) -> str:
    colour = colours.get(worker, "#777")
    return f"<span class=w style='background:{colour}'>{html.escape(worker)}</span>"


def _labels(labels: list[str] | None) -> str:
    if not labels:
        return ""
    return f"<div class=lab>ground truth: {html.escape(', '.join(labels))}</div>"


def busiest_round(tables: Mapping[str, pl.DataFrame], run_id: str) -> tuple[int, int]:
    """(subrun, round) with the most messages in a run — a good first round to read."""
    m = tables["messages"].filter(pl.col("run_id") == run_id)
    if m.is_empty():
        r = (
            tables["rounds"]
            .filter(pl.col("run_id") == run_id)
            .sort("subrun", "round")
            .row(0, named=True)
        )
        return r["subrun"], r["round"]
    top = (
        m.group_by("subrun", "round")
        .len()
        .sort(["len", "subrun", "round"], descending=[True, False, False])
    )
    return top["subrun"][0], top["round"][0]


def round_transcript_html(
    tables: Mapping[str, pl.DataFrame], run_id: str, subrun: int, round_: int
) -> str:
    def pick(name: str) -> pl.DataFrame:
        df = tables[name].filter(
            (pl.col("run_id") == run_id)
            & (pl.col("subrun") == subrun)
            & (pl.col("round") == round_)
        )
        key = next((k for k in ("seq", "position") if k in df.columns), None)
        return df.sort(key) if key else df

    workers = sorted(tables["subrun_workers"]["worker"].unique().to_list(), key=worker_key)
    colours = {w: WORKER_PALETTE[i % len(WORKER_PALETTE)] for i, w in enumerate(workers)}
    parts = [
        _CSS,
        "<div class=mbb-tr>",
        f"<h3>{html.escape(run_id)} — subrun {subrun}, round {round_}</h3>",
    ]
    decl = pick("declarations")
    if decl.height:
        rows = "".join(
            f"<tr class='{'rev' if r['revision'] else ''}'><td>{_chip(r['worker'], colours)}"
            f"{' (revised, turn ' + str(r['turn']) + ')' if r['revision'] else ''}</td>"
            f"<td>{r['bid']}</td><td>{r['duration']}</td><td>{r['position']}</td>"
            f"<td>{html.escape(r['note'])}{_labels(r['labels'])}</td></tr>"
            for r in decl.iter_rows(named=True)
        )
        parts.append(
            "<h4>Declarations (public)</h4><table><tr><th>worker</th><th>bid</th>"
            f"<th>duration (s)</th><th>wants position</th><th>note</th></tr>{rows}</table>"
        )
    msgs = pick("messages")
    if msgs.height:
        rows = "".join(
            f"<tr class='{'priv' if r['to'] else ''}'><td>{r['turn']}</td>"
            f"<td>{_chip(r['worker'], colours)}</td>"
            f"<td>{_chip(r['to'], colours) if r['to'] else 'everyone'}</td>"
            f"<td>{html.escape(r['text'])}{_labels(r['labels'])}</td></tr>"
            for r in msgs.iter_rows(named=True)
        )
        parts.append(
            "<h4>Conversation (private messages shaded)</h4><table><tr><th>turn</th>"
            f"<th>from</th><th>to</th><th>text</th></tr>{rows}</table>"
        )
    ballots = pick("ballots")
    if ballots.height:
        rows = "".join(
            f"<tr><td>{_chip(r['worker'], colours)}</td><td>"
            + " ".join(
                f"{_chip(w, colours)}&nbsp;{a}s"
                for w, a in zip(r["ranking"], r["allocations"], strict=True)
            )
            + f"</td><td>{html.escape(r['reasoning'])}{_labels(r['labels'])}</td></tr>"
            for r in ballots.iter_rows(named=True)
        )
        parts.append(
            "<h4>Ballots (secret until published)</h4><table><tr><th>voter</th>"
            f"<th>ranking and allocations</th><th>reasoning</th></tr>{rows}</table>"
        )
    sched = pick("rounds")
    if sched.height:
        s = sched.row(0, named=True)
        win = {r["worker"]: r for r in pick("windows").iter_rows(named=True)}
        rows = ""
        for pos, (w, alloc, bid) in enumerate(
            zip(s["order"], s["allocations"], s["bids"], strict=True), 1
        ):
            x = win.get(w)
            if x is None:
                ran = "—"
            elif x["status"] == "dropped":
                ran = f"dropped ({x['reason']})"
            else:
                ran = (
                    f"{x['start']:.0f}–{x['end']:.0f} s, paid {x['price']}, ended by "
                    f"{x['reason']}, progress {share_text(x['progress'], 0)}"
                )
            rows += (
                f"<tr><td>{pos}</td><td>{_chip(w, colours)}</td><td>{bid}</td>"
                f"<td>{alloc}</td><td>{ran}</td></tr>"
            )
        parts.append(
            f"<h4>Schedule ({html.escape(s['rule'])}; ballots "
            f"{'unanimous' if s['ballots_unanimous'] else 'split'})</h4><table><tr>"
            "<th>#</th><th>worker</th><th>bid</th><th>allocated (s)</th>"
            f"<th>what happened</th></tr>{rows}</table>"
        )
    parts.append("</div>")
    return "".join(parts)


class Transcript:
    """Displays as HTML in Jupyter: `Transcript(tables, run_id, subrun, round)`."""

    def __init__(
        self,
        tables: Mapping[str, pl.DataFrame],
        run_id: str,
        subrun: int | None = None,
        round_: int | None = None,
    ) -> None:
        if subrun is None or round_ is None:
            subrun, round_ = busiest_round(tables, run_id)
        self.html = round_transcript_html(tables, run_id, subrun, round_)

    def _repr_html_(self) -> str:
        return self.html
