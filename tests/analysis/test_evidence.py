"""The evidence classifier on the hand-made scenario (exact labels and evidence) and on
scripted runs (agreement with the personas' ground truth)."""

from __future__ import annotations

import polars as pl
import pytest

from mbb.analysis import (
    classify_evidence,
    ground_truth,
    prf_table,
    round_orders,
    utterance_predictions,
    utterances,
    worker_round_predictions,
)
from mbb.analysis.evidence import (
    EVIDENCE_SCHEMA,
    WITHHELD_BASIS,
    _founded_loyalty,
    deadline_disclosures,
    evidence_and_withheld,
)


def labels_by_seq(ev: pl.DataFrame) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for seq, cat in ev.select("seq", "category").iter_rows():
        out.setdefault(seq, set()).add(cat)
    return out


def test_utterances_cover_notes_messages_and_ballots(scen):
    u = utterances(scen)
    assert u.height == 18
    assert u.group_by("source").len().sort("source").rows() == [
        ("ballot", 7),
        ("declaration", 7),
        ("message", 4),
    ]


def test_exact_labels_per_utterance(scen_ev):
    assert labels_by_seq(scen_ev) == {
        # the round-8 and -9 models' gates (0.65, 0.67) still close on two declarations the
        # round-5 model read: "Bidding 900 for 120s. Highest bid should run first." and "I
        # will be calling in a favour this round"; misses, pinned so a change is visible (the
        # fourth is read again since the round-7 model, message 34; the third, "Price decides;
        # I pay what I bid.", again since the round-17 model, declaration 25)
        6: {"earliest_deadline_first", "rule_making_citation"},
        # coalition_formation (model only, within the rival margin of what it needs) gives way
        # to the cued reciprocity beside it: the two rarely share an utterance in the dev
        # corpus (the rival rule)
        7: {"reciprocity"},
        # the round-5 model's false alarm here (welfare concession on "you go ahead") is gone
        8: {"reciprocity"},
        # "Strictly by bid; equal bids by queue order.": tie-break deference by the definition;
        # the round-7 model missed it (0.23): its masked copies moved weight from the words to
        # the ballot's context, which runs do not give the text model; the round-8 model's
        # context-free ballot copies read it again (0.85; the round-9 model 0.82)
        9: {"price_primary", "tie_break_deference"},
        10: {"earliest_deadline_first"},
        # by bid (the ballot equals the bid order); a miss, pinned: "for a favour later" is not
        # read as reciprocity since the round-5 model (the round-4 model's 0.58 cleared 0.55).
        # Models since round 13 read "as offered" as coalition loyalty (the round-17 and -18
        # models p 0.83); nothing earlier formed a bloc, so that label is withheld (below)
        11: {"price_primary"},
        25: {"price_primary"},
        27: {"reciprocity"},  # "you owe me one from before — this is the round I'd like to…"
        # "Price order. The highest bidder pays the most and should run first. I moved W3 ahead
        # of me, as I promised earlier.": price-primary (the round-8 model 0.68, the round-9
        # model 0.74; the round-7 model 0.21 missed it), reciprocity from the ballot's structure
        28: {"price_primary", "reciprocity"},
        29: {"price_primary"},  # the bare "By bid." (1.00; the round-3 model's gate turned it down)
        36: {"price_primary"},
        # "100 credits for 60s; order by price, as the mechanism intends." (0.90)
        34: {"price_primary"},
        37: {"price_primary"},
    }


def test_structural_evidence(scen_ev):
    st = scen_ev.filter(pl.col("basis") == "structural").select("seq", "category", "evidence")
    assert st.sort("seq", "category").rows() == [
        (9, "price_primary", "ballot equals the bid order (W1 > W3 > W2)"),
        (10, "earliest_deadline_first", "ballot follows the disclosed deadlines (W2 > W1 > W3)"),
        (11, "price_primary", "ballot equals the bid order (W1 > W3 > W2)"),
        # the price-first worker repays the debt: a concession tied to the favour W3 calls in
        # (message 27, the latest reciprocal exchange between them)
        (
            28,
            "reciprocity",
            "ranks W3 (bid 60) above itself (bid 120) after their reciprocal exchange in s2r1",
        ),
    ]
    # a label with a lexicon hit of its category quotes the span
    lex = scen_ev.filter((pl.col("seq") == 27) & (pl.col("basis") == "lexical"))
    assert lex["evidence"].item().startswith('favour for a favour later: "you owe"; model p=')


def test_model_evidence_lists_the_contributing_features():
    """A label from the model alone shows its probability and its top features' weights."""
    from mbb.analysis.textclf import TextModel

    spec = {
        "labels": ["anchoring", "__any__"],
        "thresholds": {"anchoring": 0.5, "__any__": 0.5},
        "intercepts": {"anchoring": -1.0, "__any__": 5.0},
        "vocabulary": ["w:stubborn"],
        "weights": {"anchoring": [[0, 10.0]], "__any__": []},
    }
    (lab,) = TextModel(spec).predict("Stubborn.", "public")
    # 8 n-grams (the word and 7 character 4-grams), l2-normalised: x = 1/sqrt(8)
    assert (lab.category, lab.evidence) == ("anchoring", 'model p=0.93: word "stubborn" +3.54')
    assert (
        TextModel({**spec, "intercepts": {"anchoring": -1.0, "__any__": -9.0}}).predict(
            "Stubborn.", "public"
        )
        == []
    )  # the neutral gate closes


def test_a_label_sure_enough_passes_a_closed_gate_and_says_so():
    """With `gate_override`, a label at least that sure is given although the gate judged the
    utterance neutral; its evidence says so and its margin is its distance to the override."""
    from mbb.analysis.textclf import TextModel

    spec = {
        "labels": ["anchoring", "__any__"],
        "thresholds": {"anchoring": 0.5, "__any__": 0.5},
        "intercepts": {"anchoring": -1.0, "__any__": -9.0},
        "vocabulary": ["w:stubborn"],
        "weights": {"anchoring": [[0, 10.0]], "__any__": []},
    }
    assert TextModel(spec).predict("Stubborn.", "public") == []  # no override: the gate rules
    labels, margins = TextModel({**spec, "gate_override": 0.9}).decide("Stubborn.", "public")
    (lab,) = labels
    assert lab.category == "anchoring" and lab.evidence.endswith(
        "(past the neutral gate: p >= 0.90)"
    )
    assert abs(margins["anchoring"] - (lab.probability - 0.9)) < 1e-3
    assert TextModel({**spec, "gate_override": 0.95}).predict("Stubborn.", "public") == []
    # a threshold shift (the sensitivity analyses') moves the override with the thresholds
    shifted = TextModel({**spec, "gate_override": 0.9})
    assert shifted.predict("Stubborn.", "public", threshold_shift=0.05) == []
    (eased,) = shifted.predict("Stubborn.", "public", threshold_shift=-0.05)
    assert eased.evidence.endswith("(past the neutral gate: p >= 0.85)")
    # an override below what the label needs does not lower its threshold
    low = {**spec, "gate_override": 0.2, "intercepts": {"anchoring": -4.5, "__any__": -9.0}}
    assert TextModel(low).predict("Stubborn.", "public") == []
    # ...nor lets a trusted cue label under a closed gate (p 0.36 < 0.5 needed, over 0.2)
    cued = {**low, "intercepts": {"anchoring": -2.5, "__any__": -9.0}}
    cued["trusted_cues"] = ["anchoring/holds the opening figure"]
    assert TextModel(cued).predict("Stubborn. My opening bid stands.", "public") == []


def test_round_orders_and_disclosures(scen):
    d = deadline_disclosures(scen)
    assert d.select("worker", "left_s").rows() == [("W2", 300.0)]
    o = round_orders(scen).sort("subrun", "round")
    assert o["bid_order"].to_list()[0] == ["W1", "W3", "W2"]
    assert o["sjf_order"].to_list()[0] == ["W2", "W3", "W1"]
    assert o["edf_order"].to_list()[0] == ["W2", "W1", "W3"]
    # s2 r2: equal durations fall back to bid order, so the structural signal is ambiguous
    assert o["sjf_order"].to_list()[2] == o["bid_order"].to_list()[2] == ["W1", "W3"]


def test_no_structural_price_primary_when_another_principle_is_named(events):
    Log, tables_of = events

    log = Log("base-seed0009")
    log.run_started(
        "base", [("A", "coalition_builder", 100, 100.0), ("B", "price_first", 100, 100.0)]
    )
    log.subrun_started(1, {"A": 100, "B": 100}, {"A": 100.0, "B": 100.0})
    log.round(
        1,
        1,
        ["A", "B"],
        {"A": (20, 90, "x"), "B": (10, 60, "y")},
        [],
        {
            "A": (["A", "B"], "Sticking with our bloc as agreed: A first, others after."),
            "B": (["A", "B"], "no reason given"),
        },
        ["A", "B"],
        [20, 10],
    )
    ev = classify_evidence(tables_of(log))
    assert labels_by_seq(ev) == {5: {"coalition_loyalty"}, 6: {"price_primary"}}
    assert ev.filter(pl.col("seq") == 6)["basis"].to_list() == ["structural"]


def test_worker_round_level(scen_ev):
    wr = worker_round_predictions(scen_ev)
    w1 = wr.filter((pl.col("worker") == "W1") & (pl.col("subrun") == 1))
    assert sorted(w1["category"]) == ["price_primary", "reciprocity", "tie_break_deference"]
    # the ballot's structure alone from the round-7 to the round-19 model: "Strictly by bid;
    # equal bids by queue order." read price-primary at 0.53 (round 7), 0.65 (round 8) and 0.68
    # (round 19), under its 0.70; the round-21 model reads the words too (0.78), as the round-6
    # model did (0.81): a miss of the text model moving to the planted truth
    assert w1.filter(pl.col("category") == "price_primary")["basis"].item() == "lexical+structural"


def test_ground_truth_is_never_read(scen):
    """Putting labels into the events does not change the predictions."""
    before = classify_evidence(scen)
    t = dict(scen)
    for name in ("messages", "declarations", "ballots"):
        t[name] = t[name].with_columns(pl.lit(["social_proof"]).alias("labels"))
    assert classify_evidence(t).equals(before)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many
    from mbb.core.paths import PROJECT_ROOT

    out = tmp_path_factory.mktemp("scripted")
    b = run_many(
        load_params(PROJECT_ROOT / "params" / "base.yaml"), runs=10, out_dir=out, processes=1
    ).check()
    return b.tables


def test_scripted_macro_f1(scripted):
    ev = classify_evidence(scripted)
    utt = prf_table(ground_truth(scripted), utterance_predictions(ev), ["run_id", "seq"])
    wr = prf_table(
        ground_truth(scripted, "worker_round"),
        worker_round_predictions(ev),
        ["run_id", "subrun", "round", "worker"],
    )
    # A pipeline check on mbb's own text, not a validity estimate: the classifier was not
    # written from the persona templates (the gold corpus measures validity), and the scripted
    # intents label some lines differently from the taxonomy's definitions. So: it runs, most
    # scripted behaviour is found, and a collapse (a broken model file) fails.
    for table in (utt, wr):
        macro = table.filter(pl.col("category") == "macro (enacted)")
        assert macro["f1"].item() >= 0.6
        enacted = table.filter((pl.col("support") > 0) & (pl.col("category") != "macro (enacted)"))
        assert enacted.height >= 15
        assert (enacted["f1"] >= 0.7).sum() >= 7


# --- coalition loyalty needs a bloc on record (`evidence._founded_loyalty`) --------------------
# Built by hand (not through the model): which guesses the check keeps must not depend on which
# texts the shipped model happens to read as loyalty.


def _lex_and_tables(rows):
    """rows: (seq, worker, source, to, category, basis, text) -> (tables, utterances, lex)."""
    keys = dict(run_id="r", subrun=1, round=1)
    lex = pl.DataFrame(
        [
            dict(keys, seq=s, worker=w, source=src, category=c, basis=b, evidence=f"ev{s}")
            for s, w, src, _to, c, b, _t in rows
        ],
        schema=EVIDENCE_SCHEMA,
    ).select(list(EVIDENCE_SCHEMA))
    u = pl.DataFrame(
        [dict(run_id="r", seq=s, text=t) for s, _w, _src, _to, _c, _b, t in rows]
    ).unique()
    msgs = pl.DataFrame(
        [dict(run_id="r", seq=s, to=to) for s, _w, src, to, *_ in rows if src == "message"],
        schema={"run_id": pl.String, "seq": pl.Int64, "to": pl.String},
    ).unique()
    return {"messages": msgs}, u, lex


def _kept_and_withheld(rows):
    tables, u, lex = _lex_and_tables(rows)
    kept, withheld = _founded_loyalty(tables, u, lex)
    loyal = kept.filter(pl.col("category") == "coalition_loyalty")
    return sorted(loyal["seq"].to_list()), withheld


M_, B_, D_ = "message", "ballot", "declaration"
GUESS = ("coalition_loyalty", "model")
FORM = ("coalition_formation", "model")


def test_a_loyalty_guess_with_nothing_before_it_is_withheld_and_says_why():
    kept, withheld = _kept_and_withheld(
        [
            (3, "W2", B_, None, *GUESS, "W1 ahead of me as offered, for a favour later"),
            (5, "W3", M_, None, *FORM, "W1, W3: let us vote as one"),  # later: founds nothing
        ]
    )
    assert kept == []
    assert withheld["seq"].to_list() == [3]
    assert withheld["basis"].to_list() == [WITHHELD_BASIS]
    (ev,) = withheld["evidence"].to_list()
    assert ev.startswith("ev3; withheld:") and "W2 could see" in ev


@pytest.mark.parametrize(
    ("founder", "kept_seqs"),
    [
        ((1, "W4", M_, None, *FORM, "bloc?"), [3]),  # public message: everyone sees it
        ((1, "W4", D_, None, *FORM, "bloc?"), [3]),  # a declaration is public
        ((1, "W4", M_, "W2", *FORM, "bloc?"), [3]),  # private to the speaker
        ((1, "W2", M_, "W4", *FORM, "bloc?"), [3]),  # sent by the speaker
        ((1, "W2", B_, None, *FORM, "bloc?"), [3]),  # the speaker's own ballot
        ((1, "W4", M_, "W5", *FORM, "bloc?"), []),  # private between two others
        ((1, "W4", B_, None, *FORM, "bloc?"), []),  # another worker's ballot
        ((1, "W4", M_, None, "exclusionary_coalition", "model", "shut W5 out"), [3]),
        ((1, "W4", M_, None, "coalition_loyalty", "lexical", "our bloc holds"), [1, 3]),
        ((1, "W4", M_, None, "rule_making_citation", "model", "we take turns by round"), [3]),
        ((1, "W4", M_, None, "rule_making_citation", "model", "lowest bid first"), []),
    ],
)
def test_what_founds_a_loyalty_guess_is_what_its_speaker_saw_before_it(founder, kept_seqs):
    kept, withheld = _kept_and_withheld(
        [founder, (3, "W2", M_, None, *GUESS, "as agreed, W4 first")]
    )
    assert kept == kept_seqs
    assert withheld.height == (0 if 3 in kept_seqs else 1)


def test_a_cued_loyalty_label_is_never_withheld():
    kept, withheld = _kept_and_withheld([(2, "W2", M_, None, "coalition_loyalty", "lexical", "x")])
    assert kept == [2] and withheld.is_empty()


def test_a_founded_guess_founds_later_ones_and_an_unfounded_one_founds_none():
    # W4 -> W2 privately forms a bloc; W2 then says publicly it keeps to it; W3 saw only that
    chain = [
        (1, "W4", M_, "W2", *FORM, "you and me?"),
        (3, "W2", M_, None, *GUESS, "sticking with W4"),
        (5, "W3", M_, None, *GUESS, "fine, W2 and W4 first as they agreed"),
    ]
    kept, withheld = _kept_and_withheld(chain)
    assert kept == [3, 5] and withheld.is_empty()
    # the same talk without the private formation: W2's guess is withheld, so founds nothing
    kept, withheld = _kept_and_withheld(chain[1:])
    assert kept == [] and withheld["seq"].to_list() == [3, 5]


def test_withheld_labels_are_kept_by_evidence_and_withheld(scen):
    ev, withheld = evidence_and_withheld(scen)
    assert ev.equals(classify_evidence(scen))
    assert set(withheld.columns) == set(ev.columns)
    assert (withheld["basis"] == WITHHELD_BASIS).all()
    assert withheld.join(ev, on=["run_id", "seq", "category"]).is_empty()


def test_the_planted_ballot_read_as_loyalty_is_withheld_with_its_reason(scen):
    # seq 11, W3's ballot "By bid; with W1 ahead of me as offered, for a favour later.": the
    # shipped model reads coalition loyalty (no cue); nothing earlier formed or kept a bloc, so
    # the label is withheld and the ballot keeps its structural price-primary label (pinned:
    # another model may read the ballot differently, and then this moves visibly)
    ev, withheld = evidence_and_withheld(scen)
    assert withheld.select("seq", "worker", "category").rows() == [(11, "W3", "coalition_loyalty")]
    (reason,) = withheld["evidence"].to_list()
    assert reason.startswith("model p=") and "nothing earlier in the run that W3" in reason
    assert set(ev.filter(pl.col("seq") == 11)["category"]) == {"price_primary"}
