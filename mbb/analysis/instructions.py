"""What LLM workers of a condition read, and what the taxonomy classifier finds in it.

mbb's instructions state the rules of the protocol and never a strategy (what agents try is
what is being measured). `instruction_parts` renders every piece of text an LLM worker of a
condition reads, through the agents' own prompt builders: the negotiator's system prompt (the
generated explanation, section by section, the answers' fields and its identity), its turn
messages and phase asks, its after-action report and condensed-history prompts; the solver's
system prompt (the task, the generated rules, the tools), its task statement, the arena's
notices and its report prompt. `instruction_hits` runs the evidence classifier (the one that
labels transcripts, `mbb.analysis.evidence.classify_texts`) over every sentence of them, so a
suggestion that slipped in shows up as a taxonomy label with its evidence; the test of the
instructions (`tests/test_instructions.py`) renders every mechanism x switch x time model and
requires each hit to be on the list of rule statements it justifies.

What is mandated is not derived from here: a condition's mandated categories are what its rules
impose (`mbb.protocol.explain.imposed`, see `mbb.analysis.institutions`). The instruction text
is also the vocabulary reference of the linguistic measures (`condition_instructions`: words an
agent read are never counted as new).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from mbb.params import Condition

__all__ = ["condition_instructions", "instruction_hits", "instruction_parts"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _population(cond: Condition) -> list[str]:
    return [f"W{i + 1}" for i in range(max(2, cond.workers.count))]


def _config(cond: Condition) -> Any:
    from mbb.llm.config import ModelConfig

    return next(iter(cond.models.values()), None) or ModelConfig.model_validate(
        {"model": "placeholder"}
    )


def _view(cond: Condition, population: list[str], **kw: Any) -> Any:
    from mbb.core.agent_api import RoundView

    base: dict[str, Any] = dict(
        worker=population[0],
        subrun=1,
        round=1,
        turn=0,
        now_s=0.0,
        budget=cond.budget.credits,
        deadline_s=cond.deadline.minutes * 60.0,
        need_s=0.0,
        wanted_s=cond.windows.min_s,
        scratch=None,
        candidates=population,
        population=population,
        declarations={},
        posts=[],
        past_rounds=[],
        window_min_s=cond.windows.min_s,
        window_max_s=cond.windows.max_s,
        revisable=cond.negotiation.bids == "revisable",
        max_turns=cond.negotiation.max_turns,
        subruns_total=cond.subruns,
    )
    base.update(kw)
    return RoundView(**base)


def _negotiator_parts(cond: Condition) -> list[tuple[str, str, str, str]]:
    from mbb.agents.backends import llm_solvers
    from mbb.agents.negotiator import make_llm_negotiator
    from mbb.agents.negotiator.conversation import Conversation
    from mbb.agents.prompts import negotiator as prompts
    from mbb.core.actions import Declaration
    from mbb.core.agent_api import SubrunRecap
    from mbb.core.scratch import Scratch
    from mbb.protocol.explain import explain

    population = _population(cond)
    no_client: Any = None  # the prompt builder never calls the model
    neg = make_llm_negotiator(
        population[0],
        config=_config(cond),
        llm=no_client,
        emit=None,
        cache=None,
        condition=cond,
        llm_solvers=llm_solvers(cond),
    )
    view = _view(cond, population)
    role = "negotiator"
    out = [
        (role, s.tag, s.rule, s.text)
        for s in explain(cond, population, llm_solvers=llm_solvers(cond))
    ]
    plan = neg.plan(view)
    system = neg.system_prompt(view)
    rules = "\n\n".join(s.text for s in explain(cond, population, llm_solvers=llm_solvers(cond)))
    out.append((role, "answers", "protocol", _without_schemas(system.replace(rules, ""))))
    decl = Declaration(bid=10, duration=cond.windows.min_s, position=1, note="", labels=())
    declared = {w: decl for w in population}
    for ask in neg.prompt.asks(plan):
        v = view if ask.name == "declaration" else _view(cond, population, declarations=declared)
        if ask.name == "conversation_turn":
            v = _view(cond, population, declarations=declared, turn=1)
        out.append(
            (role, f"turn:{ask.name}", "protocol", neg.prompt.turn(v, ask, Conversation(10**6)))
        )
        # the line opening the next turn after the protocol answered for the worker
        defaulted = prompts.DEFAULTED.format(
            name=ask.name, default=prompts.DEFAULT_ANSWERS[ask.name]
        )
        out.append((role, f"turn:{ask.name}", "protocol", defaulted))
    recap = SubrunRecap(
        worker=population[0],
        subrun=1,
        task_id="t",
        outcome="completed",
        score=1.0,
        budget_left=cond.budget.credits,
        spent=0,
        windows=1,
        granted_s=60.0,
        used_s=60.0,
        waited_s=0.0,
        rounds=[],
    )
    scratch = Scratch(cond.memory.max_chars)
    if cond.memory.reports:
        out.append((role, "report", "protocol", neg.prompt.report_turn(recap, view, 250)))
    if cond.memory.enabled:
        out.append((role, "summary", "protocol", neg.prompt.summary_turn(scratch, 200)))
    (r_sys, r_user), (s_sys, s_user) = neg.prompt.standalone(recap, scratch, view, 250, 200)
    if cond.memory.reports:
        out += [(role, "report", "protocol", r_sys), (role, "report", "protocol", r_user)]
    if cond.memory.enabled:
        out += [(role, "summary", "protocol", s_sys), (role, "summary", "protocol", s_user)]
    return out


def _solver_parts(cond: Condition) -> list[tuple[str, str, str, str]]:
    from mbb.agents.llm_solver import LlmSolver
    from mbb.agents.prompts import solver as sp
    from mbb.params import SolverLoopParams
    from mbb.protocol.explain import clock_of, explain_solver

    population = _population(cond)
    n_others = len(population) - 1
    no: Any = None  # the prompt builder touches no client, suite or resource
    solver = LlmSolver(
        population[0],
        _config(cond),
        no,
        no,
        no,
        None,
        None,
        SolverLoopParams(),
        cond.windows.min_s,
        cond.windows.max_s,
        n_others,
        clock_of(cond),
        cond,
    )
    role = "solver"
    sections = explain_solver(cond, n_others)
    out = [(role, s.tag, s.rule, s.text) for s in sections]
    system = solver.system_prompt()
    rules = solver.rules()
    out.append((role, "task", "protocol", _without_schemas(system.replace(rules, ""))))
    n = {"now": "0", "deadline_left": "600", "allocation": "60", "end": "60", "turns": "20"}
    out += [
        (
            role,
            "task",
            "protocol",
            sp.TASK.format(
                task="t",
                subrun_no=1,
                deadline="1500",
                now="0",
                window_min=cond.windows.min_s,
                window_max=cond.windows.max_s,
                samples="  $ ./reference",
                memory="(none)",
            ),
        ),
        (role, "notice", "protocol", sp.NOTICE_WINDOW_STARTED.format(**n)),
        (
            role,
            "notice",
            "protocol",
            sp.NOTICE_TIME_LEFT.format(left="30", turns="5", deadline_left="600"),
        ),
        (role, "notice", "protocol", sp.NOTICE_DEADLINE.format(deadline_left="100")),
        (
            role,
            "notice",
            "protocol",
            sp.NOTICE_WINDOW_OVER.format(why="released", used="30", allocation="60"),
        ),
        (
            role,
            "notice",
            "protocol",
            sp.NOTICE_OUTSIDE.format(
                now="0",
                deadline_left="600",
                window_min=cond.windows.min_s,
                window_max=cond.windows.max_s,
                turns=cond.llm.solver.planning_turns,
                default=cond.windows.max_s,
            ),
        ),
        (
            role,
            "notice",
            "protocol",
            sp.NOTICE_DEFAULT_REQUEST.format(
                turns=cond.llm.solver.planning_turns, seconds=cond.windows.max_s
            ),
        ),
    ]
    if cond.memory.enabled or cond.memory.reports:
        report = sp.REPORT_SYSTEM.format(worker=population[0], rules=rules, max_words=250)
        out.append((role, "report", "protocol", report.replace(rules, "")))
        out.append(
            (
                role,
                "report",
                "protocol",
                sp.REPORT_USER.format(
                    task="t",
                    outcome="completed",
                    score="1.00",
                    windows=1,
                    granted="60",
                    used="60",
                    waited="0",
                    n_commands=0,
                    command_s="0",
                    commands="  (none)",
                    memory="(none)",
                ),
            )
        )
    return out


def _without_schemas(text: str) -> str:
    """Text without its JSON lines (answer schemas, the JSON-action schema)."""
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith(("{", "[")))


def instruction_parts(
    cond: Condition, roles: tuple[str, ...] = ("negotiator", "solver")
) -> pl.DataFrame:
    """Every piece of text an LLM worker of `cond` reads, one row per part: role
    (negotiator | solver), part (an explanation section's tag, or answers, turn:<ask>, report,
    summary, task, notice), rule (`registry:name` of the rule it states, or `protocol`) and
    text. Placeholders of the turn templates are filled with sample values.

    cond: a resolved condition (`mbb.load_params`); scripted-only conditions are rendered as
    their LLM workers would read them."""
    rows: list[tuple[str, str, str, str]] = []
    if "negotiator" in roles:
        rows += _negotiator_parts(cond)
    if "solver" in roles:
        rows += _solver_parts(cond)
    return pl.DataFrame(rows, schema=["role", "part", "rule", "text"], orient="row")


def condition_instructions(cond: Condition, role: str = "negotiator") -> str:
    """The text an LLM worker of `cond` in `role` reads (its parts joined): the vocabulary
    reference of the linguistic measures. cond: a resolved condition (`mbb.load_params`)."""
    return "\n\n".join(instruction_parts(cond, (role,))["text"].to_list())


_LABELS: dict[str, list[tuple[str, str, str]]] = {}  # sentence -> (category, basis, evidence)


def _labels(sentences: list[str]) -> None:
    """Classify the sentences not seen before (once per process: the classifier is
    deterministic, and conditions share most of their sentences)."""
    from mbb.analysis.evidence import classify_texts

    new = sorted(set(sentences) - _LABELS.keys())
    if not new:
        return
    labels = classify_texts(pl.DataFrame({"channel": ["public"] * len(new), "text": new}))
    for x in new:
        _LABELS[x] = []
    for text, cat, basis, evidence in labels.select(
        "text", "category", "basis", "evidence"
    ).iter_rows():
        _LABELS[text].append((cat, basis, evidence))


def instruction_hits(cond: Condition) -> pl.DataFrame:
    """The evidence classifier over every sentence an LLM worker of `cond` reads: one row per
    (sentence, category) it labels, with role, part, rule, sentence, category, basis and the
    evidence. An empty frame means the classifier finds no tactic or norm in the instructions.

    cond: a resolved condition (`mbb.load_params`)."""
    parts = instruction_parts(cond)
    rows = []
    for role, part, rule, text in parts.iter_rows():
        for sent in _SENTENCE.split(text):
            sent = sent.strip()
            if len(sent) >= 4 and not sent.startswith(("{", "[")):
                rows.append((role, part, rule, sent))
    seen: set[tuple[str, str, str, str]] = set()
    _labels([r[3] for r in rows])
    out = []
    for r in rows:
        if r in seen:
            continue
        seen.add(r)
        out += [(*r, cat, basis, ev) for cat, basis, ev in _LABELS[r[3]]]
    cols = ("role", "part", "rule", "sentence", "category", "basis", "evidence")
    schema = dict.fromkeys(cols, pl.String)
    return pl.DataFrame(out, schema=schema, orient="row").sort(
        "role", "part", "category", "sentence"
    )
