"""The text model's round-2 features: shorthand spelled out, negation and if-clause scopes, a
first-person refusal negating the cues after it, the earlier messages featurised apart (a bland
accepting reply inherits their category), and numbers and named orders read against the
context. Each is checked on hand-written cases, not on corpus items."""

from __future__ import annotations

from mbb.analysis.lexicon import cue_hits
from mbb.analysis.textclf import (
    _scoped_tokens,
    chosen_option,
    earlier_features,
    expand,
    features,
    load_model,
    number_facts,
)


def test_shorthand_is_spelled_out_but_not_inside_words_or_numbers():
    assert expand("u owe me, dl is 300s, pls") == "you owe me, deadline is 300s, please"
    assert expand("W3 wont budge; ur move") == "W3 won't budge; your move"
    assert expand("build/u2 and a 'k' in turnkey") == "build/u2 and a 'k' in turnkey"


def test_negation_and_condition_scopes_end_at_the_clause():
    toks = _scoped_tokens("I won't reopen it, but if you drop to 90 then I'll back you.")
    scope = {t: s for t, s in toks}
    assert scope["reopen"] == "n" and scope["it"] == "n"
    assert scope["drop"] == "i" and scope["back"] == ""  # "then" ends the if-clause
    f = features("I won't reopen it.", "public")
    assert "nw:reopen" in f and "w:reopen" in f


def test_a_first_person_refusal_negates_the_cues_after_it():
    def hits(t):
        return {(h.category, h.negated) for h in cue_hits(t)}

    assert ("renegotiation", True) in hits("I won't reopen the order for W5's new number.")
    assert ("renegotiation", False) in hits("W5's new number: let's reopen the order.")
    # ...also cues marked not negatable, unless the refusal is the cue's own wording
    assert ("divide_and_conquer", True) in hits("I'm not going to try to split you and W5 up.")
    assert ("coalition_loyalty", False) in hits("I won't defect.")
    assert ("anchoring", False) in hits("I'm not moving off 150.")
    # the scope ends with the clause
    assert ("renegotiation", False) in hits("I won't lie to you. Let's reopen the order.")


def test_an_accepting_reply_inherits_the_earlier_category():
    ctx = {"in_reply_to": "W1: From now on, whoever lost the last tie goes first."}
    f = earlier_features("Fine, same as last time then.", "public", ctx)
    assert f["e:rule_making_citation"] == 1.0 and f["acc:rule_making_citation"] == 1.0
    assert any(k.startswith("ew:") for k in f)
    long = "I have been compiling the parser all afternoon and the tests still fail on two inputs."
    g = earlier_features(long, "public", ctx)
    assert "e:rule_making_citation" in g and "acc:rule_making_citation" not in g
    assert earlier_features("Fine.", "public", {}) == {}
    # the header of an earlier line ("round 2, W3 (public):") is not read as its words
    h = earlier_features("ok", "public", {"earlier": ["round 2, W3 (public): hello there"]})
    assert "ew:hello" in h and "ew:round" not in h and "ew:public" not in h


def test_a_reply_that_puts_its_answer_off_inherits_nothing():
    ctx = {"in_reply_to": "W1: From now on, whoever lost the last tie goes first."}
    for text in (
        "Still thinking.",
        "Checking the queue log. Will revert.",
        "I'll read it properly after this window. Busy.",
        "Fine, let me check my numbers first.",
    ):
        f = earlier_features(text, "public", ctx)
        assert "e:rule_making_citation" in f, text  # what it answers is still read
        assert "acc:rule_making_citation" not in f and "ctx:accepting_reply" not in f, text
    # the words alone do not make a deferral: the machine being busy, checking in, reading
    for text in ("Machine busy?", "Just checking in.", "Then I'll read it at its price."):
        assert "acc:rule_making_citation" in earlier_features(text, "public", ctx), text


def test_a_reply_that_turns_down_or_asks_inherits_nothing():
    """Round 23: a refusal, a wh-question or a request to see something first goes along with
    nothing, however short; "No problem", a bare "50?", "What if...?" and "W5 first." still
    can. Some phrasings are those of neutral items of the frozen splits that the round-22
    candidate labelled ("Not this time.", "Let me see the bids first."): the patterns were
    written from them, which is why split 23, not these cases, is their check."""
    ctx = {"in_reply_to": "W1: From now on, whoever lost the last tie goes first."}
    for text in (
        "Not this time.",
        "No.",
        "nope, I'll pass",
        "I'd rather not.",
        "Count me out.",
        "I won't do that.",
    ):
        f = earlier_features(text, "public", ctx)
        assert "e:rule_making_citation" in f, text  # what it answers is still read
        assert "acc:rule_making_citation" not in f, text
        assert f.get("ctx:declining_reply") == 1.0 and "ctx:accepting_reply" not in f, text
    for text in (
        "What did you bid this round?",
        "Hm. How much does W1 need?",
        "Let me see the bids first.",
        "Send me your window length first.",
    ):
        f = earlier_features(text, "public", ctx)
        assert "acc:rule_making_citation" not in f and "ctx:declining_reply" not in f, text
    for text in (
        "No problem, deal.",
        "No objection.",
        "I don't mind.",
        "50?",
        "What if we each took 80?",
        "Same as before?",
        "W5 first.",
    ):
        assert "acc:rule_making_citation" in earlier_features(text, "public", ctx), text


def test_a_reply_that_picks_an_alternative_by_its_place_reads_that_alternative():
    def pick(text: str, question: str, key: str = "in_reply_to") -> str | None:
        return chosen_option(text, {key: [question] if key == "earlier" else question})

    two = "W3: Do we order by the highest bid, or by who joined the queue first?"
    assert pick("The latter, obviously.", two) == "by who joined the queue first"
    assert pick("Former.", two) == "Do we order by the highest bid"
    assert pick("+1 for the second option!", two) == "by who joined the queue first"
    # a list before the "or", a lead-in before the alternatives, a closing run of questions
    assert pick("The third one.", "W1: Deadline, duration or bid?") == "bid"
    assert pick("Second one.", "W1: Right, so, bids or arrival?") == "arrival"
    runs = "round 2, W4 (public): How do we sort? Deadlines? Window length? Bids?"
    assert pick("The last one. Gold talks.", runs, "earlier") == "Bids"
    # not a pick: more words in its clause, a place the message does not have, no alternatives
    assert pick("The first one to finish gets the bonus.", two) is None
    assert pick("Third one.", two) is None
    assert pick("The latter.", "W2: I'll take the second slot.") is None
    assert chosen_option("The latter.", None) is None


def test_a_picking_reply_inherits_only_the_alternative_it_took():
    ctx = {"in_reply_to": "W3: Do we order by the highest bid, or by who joined the queue first?"}
    took = earlier_features("The latter, and I say it as the one who would lose by it.", "x", ctx)
    assert took["acc:recency_first"] == 1.0  # a pick accepts, whatever its length
    assert "e:price_primary" not in took  # the alternative it did not take is not read
    both = earlier_features("Mine's 90.", "public", ctx)
    assert "e:price_primary" in both and "e:recency_first" in both
    f = features("The latter.", "public", ctx)
    assert "w:queue" in f and "w:queue" not in features("The latter.", "public", {})


def test_the_shipped_model_labels_a_pick_and_says_which_alternative_it_read():
    ctx = {"in_reply_to": "W2: Shall we sort by the bids, or by who got into the queue first?"}
    model = load_model()
    (label,) = model.predict("Second one.", "public", ctx)
    assert label.category == "recency_first"
    assert label.evidence.endswith('picks: "by who got into the queue first"')
    assert model.predict("Second one.", "public", {}) == []


def test_earlier_lines_are_read_through_the_earlier_line_model():
    """`ep:` carries the highest probability of each category over the earlier lines (below
    EARLIER_MIN_P: nothing), `acp:` the same only for a short or accepting reply."""
    seen: list[str] = []

    def scorer(line: str) -> dict[str, float]:
        seen.append(line)
        return {"reciprocity": 0.9 if "back" in line else 0.4, "anchoring": 0.1}

    ctx = {
        "in_reply_to": "W1: Let me go first and I'll back you next subrun.",
        "earlier": ["round 2, W3 (public): what is everyone declaring?"],
    }
    f = earlier_features("Done.", "private", ctx, scorer)
    assert seen == ["Let me go first and I'll back you next subrun.", "what is everyone declaring?"]
    assert f["ep:reciprocity"] == 0.9 and f["acp:reciprocity"] == 0.9
    assert "ep:anchoring" not in f and "acp:anchoring" not in f
    long = "I have been compiling the parser all afternoon and the tests still fail on two inputs."
    g = earlier_features(long, "private", ctx, scorer)
    assert g["ep:reciprocity"] == 0.9 and "acp:reciprocity" not in g
    assert not any(k.startswith(("ep:", "acp:")) for k in earlier_features("Done.", "private", ctx))


def test_the_shipped_model_reads_earlier_lines_with_its_own_line_model():
    model = load_model()
    assert model.earlier is not None
    p = model.earlier("You owe me one from last subrun, I'm calling it in now.")
    assert p["reciprocity"] > 0.5 > p["shortest_job_first"]
    f = model.features("Fine.", "private", {"in_reply_to": "W2: You owe me one, calling it in."})
    assert f.get("acp:reciprocity", 0) > 0.5


def test_numbers_and_named_orders_read_against_the_context():
    ctx = {"speaker": "W2", "bids": {"W1": 90, "W2": 180, "W3": 120}, "durations": {"W2": 60}}
    assert number_facts("Still 180.", ctx) == ["num:own_bid", "num:own_bid_top"]
    assert "num:other_bid" in number_facts("W3 offered 120.", ctx)
    assert "ord:bid" in number_facts("W2, W3, W1.", ctx)
    assert "ord:not_bid" in number_facts("W1, W3, W2.", ctx)
    assert "ord:bid_figures" in number_facts("180 > 120 > 90, done.", ctx)
    dl = {"deadlines_disclosed": {"W4": 170, "W2": 650, "W5": 900}}
    assert "ord:deadline" in number_facts("Then W4, W2, W5.", dl)
    rk = {"ranking": ["W3", "W1", "W2"], "arrival": ["W3", "W1", "W2"]}
    assert {"ord:ranking", "ord:arrival"} <= set(number_facts("W3 W1 W2 as they came", rk))
    assert number_facts("Still 180.", None) == []


def test_the_shipped_model_gives_margins_with_its_labels():
    labs, margins = load_model().decide("You owe me one, I'm calling it in now.", "private")
    assert "reciprocity" in [x.category for x in labs] and margins["reciprocity"] > 0
    assert all(margins[x.category] >= 0 or "trusted cue" in x.evidence for x in labs)
    assert set(margins) == set(load_model().labels) - {"__any__"}


def _two_label_spec(coalition_intercept: float, rivals: list[list[str]]) -> dict:
    """Reciprocity sure of itself, coalition formation at sigmoid(coalition_intercept), no
    n-gram weights: what is labelled depends on the cues and the rival rule alone."""
    labels = ["reciprocity", "coalition_formation"]
    return {
        "labels": labels,
        "thresholds": dict.fromkeys(labels, 0.5),
        "intercepts": {"reciprocity": 3.0, "coalition_formation": coalition_intercept},
        "vocabulary": [],
        "weights": {lab: [] for lab in labels},
        "model_only_margin": 0.0,
        "rivals": rivals,
        "rival_margin": 0.05,
    }


def test_a_weak_label_without_its_cue_gives_way_to_a_cued_rival():
    from mbb.analysis.textclf import TextModel

    deal = "I'll rank you ahead of me this round if you back me the next time we meet."
    assert "reciprocity" in {h.category for h in cue_hits(deal) if not h.negated}
    pair = [["reciprocity", "coalition_formation"]]

    def labels(intercept: float, rivals: list[list[str]], text: str = deal) -> set[str]:
        return {
            x.category
            for x in TextModel(_two_label_spec(intercept, rivals)).predict(text, "private")
        }

    # p = 0.525 clears its 0.5 by less than the rival margin: dropped beside the cued rival...
    assert labels(0.1, pair) == {"reciprocity"}
    margins = TextModel(_two_label_spec(0.1, pair)).decide(deal, "private")[1]
    assert margins["coalition_formation"] == 0.0  # unsure: the combined classifier asks the LLM
    # ...but kept when it is sure, when the pair is no rival pair, or when no rival cue fired
    assert labels(2.0, pair) == {"reciprocity", "coalition_formation"}
    assert labels(0.1, []) == {"reciprocity", "coalition_formation"}
    assert labels(0.1, pair, "Sounds fine to me.") == {"reciprocity", "coalition_formation"}


def test_rivals_are_the_pairs_that_rarely_share_an_utterance():
    from mbb.analysis.corpus import Utterance
    from mbb.analysis.train_taxonomy import RIVAL_SHARE, _rivals

    def item(i: int, labels: list[str]) -> Utterance:
        return Utterance(id=f"x-{i}", text="t", channel="public", labels=labels)

    items = [item(i, ["reciprocity", "reputation"]) for i in range(10)]
    items += [item(10 + i, ["coalition_formation"]) for i in range(10)]
    items += [item(20, ["reciprocity", "coalition_formation"])]  # 1 in 11: above the share
    assert RIVAL_SHARE < 1 / 11
    pairs = _rivals(items)
    assert ["reciprocity", "coalition_formation"] not in pairs
    assert ["reciprocity", "reputation"] not in pairs
    assert ["coalition_formation", "reputation"] in pairs  # never together


def test_a_masked_copy_drops_the_cue_words_and_keeps_the_rest():
    from mbb.analysis.corpus import Utterance
    from mbb.analysis.train_taxonomy import masked_text

    u = Utterance(
        id="x-1",
        channel="private",
        text="I let you go first last time, so u owe me now.",
        labels=["reciprocity"],
    )
    t = masked_text(u)
    assert t is not None and "owe" not in t and "go first" not in t  # both cues, shorthand read
    assert "let" in t and "last time" in t and "now" in t
    assert not [h for h in cue_hits(t, "message") if not h.negated]
    # nothing to mask: no cue fires, or only a negated one (its words are the evidence)
    assert masked_text(Utterance(id="x-2", channel="note", text="Bidding 120 for 60s.")) is None
    refused = Utterance(id="x-3", channel="public", text="I won't reopen the order.")
    assert [h.negated for h in cue_hits(refused.text)] == [True]
    assert masked_text(refused) is None


def test_masked_copies_teach_the_words_around_a_cue(monkeypatch):
    """Every positive says "you owe" beside a word of its own ("ledger"); neutral items use
    neither. Without copies the cue explains the label and "ledger" learns little; with them
    the copy, which lacks the cue, can only be told apart by "ledger"."""
    from mbb.analysis import train_taxonomy as tt
    from mbb.analysis.corpus import Utterance

    fillers = ["tests pass", "build is green", "reading the spec", "extractor done", "rerun"]
    items = []
    for k in range(40):
        w = "PQ"[k % 2]
        f = fillers[k % 5]
        items.append(
            Utterance(
                id=f"p{k}",
                channel="private",
                writer=w,
                labels=["reciprocity"],
                text=f"You owe me for round {k % 4 + 1}, ledger says so; {f}.",
            )
        )
        items.append(
            Utterance(
                id=f"n{k}",
                channel="private",
                writer=w,
                labels=[],
                text=f"Round {k % 4 + 1} note: {f}, my turn after W{k % 5 + 1}.",
            )
        )
    # the masked copies alone (these messages' context-free copies would be the items again)
    monkeypatch.setattr(tt, "CONTEXT_FREE_MESSAGES", False)
    fs = tt._feats(items)
    copies = tt._copy_feats(items)
    assert sum(len(c) for c in copies) == 40  # the positives' masked copies

    def ledger_weight(with_copies: bool) -> float:
        vocab, models = tt._fit_weights(
            fs, items, ["reciprocity"], 4.0, copies if with_copies else None
        )
        return float(models["reciprocity"][0][vocab["w:ledger"]])

    assert ledger_weight(True) > 1.5 * ledger_weight(False) > 0


def test_a_ballot_also_trains_without_its_context():
    """Runs read a ballot's text alone (its ranking is structural evidence), so every dev ballot
    also trains as runs read it: a copy without the context facts its ranking gives."""
    from mbb.analysis import train_taxonomy as tt
    from mbb.analysis.corpus import Utterance

    ballot = Utterance(
        id="b-1",
        channel="ballot",
        text="Ordered by what was bid.",
        labels=["price_primary"],
        context={"ranking": ["W1", "W2"], "bids": {"W1": 150, "W2": 90}},
    )
    (with_ctx,) = tt._feats([ballot])
    (copies,) = tt._copy_feats([ballot])
    assert any(k.startswith("ctx:") for k in with_ctx)
    assert len(copies) == 1  # no cue fired: the context-free copy alone
    assert not any(k.startswith("ctx:") for k in copies[0])
    assert {k for k in copies[0] if k.startswith("w:")} == {
        k for k in with_ctx if k.startswith("w:")
    }
    # a message that answers no thread trains alone too (runs read messages alone) ...
    msg = ballot.model_copy(update={"id": "m-1", "channel": "public"})
    (msg_copies,) = tt._copy_feats([msg])
    assert len(msg_copies) == 1 and not any(k.startswith("ctx:") for k in msg_copies[0])
    # ... but a reply does not: alone it need not show what it answers ("Fine, same as last
    # time then."), and a copy with its labels would teach short replies to read as tactics
    for thread in ({"in_reply_to": "W2: bid order again?"}, {"earlier": ["round 1, W2: ..."]}):
        reply = msg.model_copy(
            update={"id": "m-2", "context": msg.context.model_copy(update=thread)}
        )
        assert tt._copy_feats([reply]) == [[]]
