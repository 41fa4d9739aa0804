from __future__ import annotations

import polars as pl

from mbb.viz.transcript import Transcript, busiest_round, round_transcript_html


def test_transcript_shows_everything_of_the_round(base_batch):
    t = base_batch.tables
    run_id = base_batch.run_ids[0]
    subrun, rnd = busiest_round(t, run_id)
    page = round_transcript_html(t, run_id, subrun, rnd)
    sel = (pl.col("run_id") == run_id) & (pl.col("subrun") == subrun) & (pl.col("round") == rnd)
    msgs = t["messages"].filter(sel)
    assert msgs.height > 0
    for text in msgs["text"]:
        assert text.replace("'", "&#x27;")[:40] in page
    private = msgs.filter(pl.col("to").is_not_null()).height
    assert page.count("class='priv'") == private
    assert page.count("<h4>") == 4  # declarations, conversation, ballots, schedule
    assert Transcript(t, run_id)._repr_html_() == page
