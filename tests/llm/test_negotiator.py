"""LlmNegotiator end to end through the real openai client against the local server."""

from __future__ import annotations

import asyncio
import json

from mbb.agents.negotiator import LlmNegotiator, make_llm_negotiator
from mbb.batch.build import load_params
from mbb.core.actions import Ballot, ConversationTurn, Declaration, Message
from mbb.core.agent_api import SubrunRecap
from mbb.core.events import parse_events
from mbb.llm.cache import LlmCache
from mbb.testing.testserver import Reply

from .conftest import SECRET, make_client, make_config
from .views import CANDS, GOOD, good_responder, make_view


def make(server, sleeps, log, worker="W1", cache=None, **cfg) -> LlmNegotiator:
    return make_llm_negotiator(
        worker, config=make_config(server, **cfg), llm=make_client(sleeps), emit=log.emit,
        cache=cache,
    )  # fmt: skip


def test_produces_valid_actions_for_a_hand_built_view(server, sleeps, log) -> None:
    server.responder = good_responder
    neg = make(server, sleeps, log)
    assert neg.concurrent is True
    decl = asyncio.run(neg.declare(make_view()))
    turn = asyncio.run(neg.converse(make_view(declared=True)))
    ballot = asyncio.run(neg.vote(make_view(declared=True)))
    assert decl == Declaration(bid=50, duration=120, position=1, note="hi")
    assert isinstance(turn, ConversationTurn)
    assert turn.messages == (Message(to="W2", text="You first, I go second?"), Message(text="ok"))
    assert turn.revision == Declaration(bid=55, duration=120, position=2, note="revised")
    assert isinstance(ballot, Ballot)
    assert ballot.ranking == ("W2", "W1", "W3")
    assert ballot.allocations == {"W1": 120, "W2": 90, "W3": 150}
    phases = [e.phase for e in parse_events(log.lines) if e.kind == "llm_call"]
    assert phases == ["declaration", "conversation", "ballot"]
    assert not log.by_kind["invalid_action"]


def test_prompt_shows_only_own_private_facts_and_visible_posts(server, sleeps, log) -> None:
    server.responder = good_responder
    asyncio.run(make(server, sleeps, log).declare(make_view()))
    body = server.completions[0].body
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "worker W1" in system
    assert "budget 700 credits" in user and "deadline in 1200 s" in user
    assert "let me go first" in user  # addressed to W1
    assert "private to W2" not in user  # not visible to W1
    assert "W3 promised to defer" in user  # scratch memory
    assert "bid 50, allocated 90 s" in user  # past round, public
    # the window its solver asked for, never its remaining work (need_s 420: a modeled
    # solver's is the task's true size, a free oracle on whether it can still finish)
    assert "your solver asked for a 120-second window" in user
    assert "420" not in user and "7 min" not in user and "still needs" not in user
    # the rules of an answer that cannot be used are stated, with each phase's default
    assert "sent back to you once" in system
    assert "a declaration of bid 0 for your solver's requested duration" in system


def test_ballot_schema_constrains_ids(server, sleeps, log) -> None:
    server.responder = good_responder
    asyncio.run(make(server, sleeps, log).vote(make_view(declared=True)))
    schema = server.completions[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["ranking"]["items"]["enum"] == CANDS


def test_ballot_must_rank_everyone_and_respect_durations(server, sleeps, log) -> None:
    bad = {
        "ranking": ["W2", "W1"],
        "allocations": [{"candidate": "W1", "seconds": 999}],
        "reasoning": "",
    }
    server.push(Reply.json(bad), Reply.json(bad))
    ballot = asyncio.run(make(server, sleeps, log).vote(make_view(declared=True)))
    assert ballot.ranking == ("W2", "W1", "W3")  # default: by bid 60 > 40 > 10
    assert ballot.allocations == {"W2": 90, "W1": 120, "W3": 200}
    assert ballot.defaulted  # so the ballot_cast event says it was the stated default
    repair = server.completions[1].body["messages"][-1]["content"]
    assert "ranking: must list every candidate exactly once; missing: W3" in repair


def test_fixed_bids_reject_revisions(server, sleeps, log) -> None:
    server.responder = good_responder  # always sends a revision
    turn = asyncio.run(
        make(server, sleeps, log).converse(make_view(declared=True, revisable=False))
    )
    assert turn.is_pass  # default after the repair also revised
    schema = server.completions[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["revision"] == {"type": "null"}


def test_unknown_recipient_is_repaired(server, sleeps, log) -> None:
    bad = {"messages": [{"to": "W9", "text": "hi"}], "revision": None}
    good = {"messages": [{"to": "W4", "text": "hi"}], "revision": None}
    server.push(Reply.json(bad), Reply.json(good))
    turn = asyncio.run(make(server, sleeps, log).converse(make_view(declared=True)))
    assert turn.messages == (Message(to="W4", text="hi"),)


def test_end_subrun_writes_report_and_summary(server, sleeps, log) -> None:
    server.responder = good_responder
    neg = make(server, sleeps, log)
    view = make_view(declared=True)
    asyncio.run(neg.vote(view))
    recap = SubrunRecap(
        worker="W1", subrun=1, task_id="t-wc", outcome="terminated", score=0.4, budget_left=600,
        spent=100, windows=2, granted_s=220, used_s=200, waited_s=310,
        rounds=view.past_rounds,
    )  # fmt: skip
    asyncio.run(neg.end_subrun(recap, view.scratch))
    kinds = [(e.kind, e.subrun, e.text) for e in view.scratch.entries]
    assert ("report", 1, "report text for the next subrun") in kinds
    assert ("summary", 1, "summary text for the next subrun") in kinds
    roles = [json.loads(x)["role"] for x in log.by_kind["llm_call"]]
    assert roles == ["negotiator", "report", "summary"]
    report_msgs = server.completions[1].body["messages"]
    report_req = report_msgs[-1]["content"]
    assert "terminated" in report_req and "310 s" in report_req
    # the report continues the subrun's conversation: its prefix is the ballot request, as sent
    ballot_msgs = server.completions[0].body["messages"]
    assert report_msgs[: len(ballot_msgs)] == ballot_msgs
    summary_msgs = server.completions[2].body["messages"]
    assert summary_msgs[: len(report_msgs)] == report_msgs
    assert summary_msgs[len(report_msgs)]["content"] == "report text for the next subrun"


def test_end_subrun_without_memory_makes_no_calls(server, sleeps, log) -> None:
    neg = make(server, sleeps, log)
    recap = SubrunRecap("W1", 1, "t", "completed", 1.0, 900, 100, 1, 60, 60, 0, [])
    asyncio.run(neg.end_subrun(recap, None))
    assert server.requests == []


def test_concurrent_phase_overlaps_requests(server, sleeps, log) -> None:
    """5 declarations gathered with a 100 ms server delay are in flight together."""
    server.responder = good_responder
    server.delay_s = 0.1
    client = make_client(sleeps)
    cfg = make_config(server)
    negs = [
        make_llm_negotiator(w, config=cfg, llm=client, emit=log.emit, cache=None)
        for w in ["W1", "W2", "W3", "W4", "W5"]
    ]

    async def phase():
        return await asyncio.gather(*(n.declare(make_view(n.worker)) for n in negs))

    out = asyncio.run(phase())
    assert all(isinstance(d, Declaration) for d in out)
    assert len(server.completions) == 5
    assert server.max_overlap() == 5  # all five were in flight at once (not timed)


def test_replay_is_identical_with_zero_requests(server, sleeps, tmp_path) -> None:
    from mbb.core.eventlog import EventLog

    server.responder = good_responder
    path = tmp_path / "cache.sqlite"

    def run(mode):
        log = EventLog("r")
        cache = LlmCache(path, mode)
        neg = make(server, sleeps, log, cache=cache)
        acts = asyncio.run(_three(neg))
        cache.close()
        return acts, log

    async def _three(neg):
        return (
            await neg.declare(make_view()),
            await neg.converse(make_view(declared=True)),
            await neg.vote(make_view(declared=True)),
        )

    live, _ = run("read_write")
    n = len(server.requests)
    replay, replay_log = run("replay")
    replay2, replay_log2 = run("replay")
    assert len(server.requests) == n == 3
    assert replay == live == replay2
    strip = lambda log: [{**json.loads(x), "wall": 0} for x in log.lines]  # noqa: E731
    assert strip(replay_log) == strip(replay_log2)  # replays are byte-identical but for wall
    assert all(json.loads(x)["cache_hit"] for x in replay_log.by_kind["llm_call"])


def test_key_never_appears_in_events_or_cache(server, sleeps, log, tmp_path) -> None:
    server.push(Reply.error(429, retry_after=1), Reply.malformed(), Reply.completion("nope"))
    server.responder = good_responder
    cache = LlmCache(tmp_path / "c.sqlite")
    neg = make(server, sleeps, log, cache=cache)
    asyncio.run(neg.declare(make_view()))
    asyncio.run(neg.vote(make_view(declared=True)))
    cache.close()
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in server.completions)
    serialized = "\n".join(log.lines)
    assert SECRET not in serialized
    assert SECRET not in (tmp_path / "c.sqlite").read_bytes().decode("latin-1")
    assert SECRET[3:20] not in serialized


def test_condition_tailors_explainer(server, sleeps, log) -> None:
    cond = load_params("params/llm_negotiators.yaml", {"mechanism": {"payment": "none"}})
    server.responder = good_responder
    neg = make_llm_negotiator(
        "W1", config=make_config(server), llm=make_client(sleeps), emit=log.emit, cache=None,
        condition=cond,
    )  # fmt: skip
    asyncio.run(neg.declare(make_view()))
    assert "No credits are charged" in server.completions[0].body["messages"][0]["content"]


def test_start_subrun_forgets_the_transcript(server, sleeps, log) -> None:
    server.responder = good_responder
    neg = make(server, sleeps, log)
    asyncio.run(neg.declare(make_view()))
    asyncio.run(neg.start_subrun(2, None))
    assert neg._last_view is None


def test_the_llm_backend_builds_a_negotiator_from_the_run_services(server, sleeps, log) -> None:
    from types import SimpleNamespace

    from mbb.agents.backends import NEGOTIATORS

    cond = load_params(
        "params/llm_negotiators.yaml", {"models": {"local": {"base_url": server.url}}}
    )
    client = make_client(sleeps)
    run = SimpleNamespace(condition=cond, emit=log.emit, llm=lambda: (client, None))
    spec = cond.worker_specs()[2]
    neg = NEGOTIATORS["llm"].build(run, spec, None)
    assert neg.worker == "W3" and neg.config.model == "smollm2" and neg.llm is client
    assert neg.config.base_url == server.url


def test_grammar_endpoints_get_ranges_in_the_schema(server, sleeps, log) -> None:
    server.responder = good_responder
    neg = make(server, sleeps, log, structured="json_object_schema")
    asyncio.run(neg.declare(make_view()))
    asyncio.run(neg.vote(make_view(declared=True)))
    decl = server.completions[0].body["response_format"]["schema"]["properties"]
    assert (decl["bid"]["minimum"], decl["bid"]["maximum"]) == (0, 700)
    assert (decl["position"]["minimum"], decl["position"]["maximum"]) == (1, 3)
    ballot = server.completions[1].body["response_format"]["schema"]["properties"]
    assert ballot["ranking"]["minItems"] == ballot["ranking"]["maxItems"] == 3
    # OpenAI strict schemas stay free of range keywords
    server.requests.clear()
    asyncio.run(make(server, sleeps, log).declare(make_view()))
    strict = server.completions[0].body["response_format"]["json_schema"]["schema"]
    assert "minimum" not in strict["properties"]["bid"]


def test_a_commitment_older_than_the_kept_posts_survives_compaction(server, sleeps, log) -> None:
    """The paper's history summary keeps open commitments: a private promise made in round 1,
    older than the 40 posts a prompt shows in full, is still in the snapshot a compacted
    conversation restarts from (in the summary of the posts it leaves out, with its text)."""
    import dataclasses

    from mbb.core.agent_api import PastRound
    from mbb.core.board import Board

    from .views import POP

    promise = "W1, if you go second now, I rank you first at our next tie. Promise."
    board = Board(readers=POP)
    board.post("W3", promise, to="W1", subrun=1, round=1, turn=1)
    for i in range(45):
        board.post(
            "W2", f"status {i}: still compiling", to=None, subrun=1, round=2 + i // 5, turn=1
        )
    rounds = [
        PastRound(r, ["W2", "W1"], {"W2": 50, "W1": 30}, {"W2": 90, "W1": 100})
        for r in range(1, 11)
    ]
    view = dataclasses.replace(
        make_view(), round=11, posts=board.visible_to("W1"), past_rounds=rounds
    )
    server.responder = good_responder
    neg = LlmNegotiator(
        "W1", config=make_config(server), llm=make_client(sleeps), emit=log.emit,
        max_history_chars=2000,
    )  # fmt: skip
    asyncio.run(neg.declare(view))
    asyncio.run(neg.declare(view))  # the first turn alone is over the budget: compacted
    first, second = (r.body["messages"] for r in server.completions[:2])
    assert promise in first[1]["content"]  # the first turn shows every post in full
    assert len(second) == 2 and "conversation so far was condensed" in second[1]["content"]
    snapshot = second[1]["content"]
    assert "(last 40 of 46)" in snapshot  # the promise is not among the posts shown in full
    assert f"[r1] W3 → you (private): {promise}" in snapshot  # but in their summary


def test_an_out_of_range_bid_is_sent_back_then_defaulted_as_the_rules_say(
    server, sleeps, log
) -> None:
    """F-2: the rule sentence says what happens to an out-of-range number: it is not set to the
    nearest bound but sent back, and a second one gets the whole default."""
    over = {"action": "declare", "bid": 5000, "duration": 120, "position": 1, "note": "all in"}
    server.push(Reply.json(over), Reply.json(over))
    decl = asyncio.run(make(server, sleeps, log).declare(make_view()))
    assert decl == Declaration(bid=0, duration=120, position=3, note="")  # not bid 700
    system = server.completions[0].body["messages"][0]["content"]
    assert "nearest bound" not in system
    assert "a number is outside its stated range" in system and "sent back to you once" in system
    repair = server.completions[1].body["messages"][-1]["content"]
    assert "bid must be within 0..700" in repair


def test_a_partial_ballot_is_refused_with_what_is_missing_never_a_repair(
    server, sleeps, log
) -> None:
    """F-7: the repair request names what is missing; nothing was appended or filled in."""
    partial = {
        "ranking": ["W1"],
        "allocations": [{"candidate": "W1", "seconds": 60}],
        "reasoning": "",
    }
    server.push(Reply.json(partial), Reply.json(GOOD["ballot"]))
    asyncio.run(make(server, sleeps, log).vote(make_view(declared=True)))
    repair = server.completions[1].body["messages"][-1]["content"]
    assert "appended" not in repair and "declared" not in repair
    assert "ranking: must list every candidate exactly once; missing: W2, W3" in repair
    assert "allocations: one entry per candidate is required; missing: W2, W3" in repair
    assert "JSON object" in repair


def test_a_native_tool_repair_asks_for_the_call_again(server, sleeps, log) -> None:
    """F-7: where answers are tool calls the repair asks for the call, not a JSON object."""
    over = {"action": "declare", "bid": 5000, "duration": 120, "position": 1, "note": ""}
    raw = json.dumps(over)
    server.push(Reply.tool_call("declaration", raw), Reply.tool_call("declaration", raw))
    asyncio.run(make(server, sleeps, log, tool_protocol="native").declare(make_view()))
    repair = server.completions[1].body["messages"][-1]["content"]
    assert "Call `declaration` again with corrected arguments" in repair
    assert "JSON object" not in repair


def test_the_next_turn_says_the_protocol_answered_for_the_worker(server, sleeps, log) -> None:
    """F-15: after a second unusable answer, the next turn opens with one line saying the
    default was used, and which."""
    over = {"action": "declare", "bid": 5000, "duration": 120, "position": 1, "note": ""}
    server.push(Reply.json(over), Reply.json(over))
    neg = make(server, sleeps, log)
    asyncio.run(neg.declare(make_view()))
    server.responder = good_responder
    asyncio.run(neg.converse(make_view(declared=True)))
    asyncio.run(neg.vote(make_view(declared=True)))
    turn = server.completions[2].body["messages"][-1]["content"]
    assert turn.startswith(
        "Your `declaration` answer could not be used, so the protocol answered for you: a "
        "declaration of bid 0 for your solver's requested duration at the last position."
    )
    assert "could not be used" not in server.completions[3].body["messages"][-1]["content"]
