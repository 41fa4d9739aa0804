"""The look every mbb figure shares: palette, worker order, panel sizes, fonts, and "none".

Importing this module does not import altair (the functions that build altair objects import
it when called), so modules that only need the palette or the worker order stay light.

Conventions the figures follow (mbb's choices):

- Workers are ordered W1, W2, ... W10 (by the number in their id, not as text), and keep one
  colour each across every figure of a population (`worker_color`); models and personas
  likewise (`model_color`).
- A condition keeps one colour in every chart of every notebook (`condition_color`): the colour
  follows from its name alone, never from which conditions a chart happens to draw.
- Only conditions are drawn in `PALETTE`'s colours. Everything else coloured has its own
  palette sharing no colour with it (`WORKER_PALETTE`, `MODEL_PALETTE`, `MECHANISM_PALETTE`,
  `CATEGORY_PALETTE` for phases, roles, measures and other kinds; `INK` for single-colour
  marks), so blue never means "base" in one chart and "W1" or "fcfs" in the next.
- Panels that are compared with each other share their scales; a panel whose scale is its own
  says so in its title.
- A panel (or a whole chart) where nothing happened says "none" (`none_layer`, `none_chart`)
  instead of being left empty.
- Font sizes (`FONT_SIZES`) are applied when a chart is rendered (`mbb.viz.render.legible`), under
  a chart's own config, so charts stay composable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import altair as alt
    import polars as pl

__all__ = [
    "CATEGORY_PALETTE",
    "CONDITION_SLOTS",
    "DASHES",
    "FONT_SIZES",
    "INK",
    "MAX_WIDTH",
    "MECHANISM_PALETTE",
    "MODEL_PALETTE",
    "NONE",
    "PALETTE",
    "PANEL_HEIGHT",
    "PANEL_WIDTH",
    "ROW_HEIGHT",
    "WIDE_WIDTH",
    "WORKER_PALETTE",
    "category_color",
    "condition_color",
    "condition_dash",
    "condition_hex",
    "model_color",
    "none_chart",
    "none_layer",
    "seeds_subtitle",
    "shared_colour_note",
    "with_empty_panels",
    "worker_color",
    "worker_key",
    "worker_order",
]

PALETTE = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
    "#eeca3b",
)
# the palettes of everything that is not a condition (mbb's choice): none shares a colour with
# PALETTE (the condition colours) or with another, so a colour means one kind of thing across
# the report. Workers: ColorBrewer Dark2 and two dark tones; models and personas: the dark
# shades of d3's category20b (a dark teal sixth, apart from the first); mechanisms: dark
# ColorBrewer diverging ends; phases, roles, measures and other kinds: ColorBrewer Set2.
WORKER_PALETTE = (
    "#1b9e77",
    "#d95f02",
    "#7570b3",
    "#e7298a",
    "#66a61e",
    "#e6ab02",
    "#a6761d",
    "#666666",
    "#1f3d7a",
    "#7f2704",
)
MODEL_PALETTE = (
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#2f6f6f",
    "#8ca252",
    "#bd9e39",
    "#ad494a",
    "#a55194",
)
MECHANISM_PALETTE = (
    "#01665e",
    "#8c510a",
    "#762a83",
    "#4d4d4d",
    "#1b7837",
    "#c51b7d",
    "#053061",
    "#b35806",
    "#2d004b",
)
CATEGORY_PALETTE = (
    "#66c2a5",
    "#fc8d62",
    "#8da0cb",
    "#e78ac3",
    "#a6d854",
    "#ffd92f",
    "#e5c494",
    "#b3b3b3",
)
INK = "#3d3d3d"  # the one colour of a chart whose marks are all alike (no legend)
# line dashes, solid first: what tells apart lines that share a colour
DASHES: tuple[tuple[int, ...], ...] = ((1, 0), (6, 3), (2, 2), (8, 3, 2, 3), (4, 4), (1, 3))
# the shipped conditions (params/*.yaml) -> their place in PALETTE (mbb's choice). The paper
# study's nine conditions (studies/scarce.yaml) and conversation_off take the ten colours; the
# others share one with a condition they are rarely drawn beside, never with base or
# memory_off: the rule makers with deadline_15 and deadline_20 (the transmission notebook draws
# them with base, memory_off, rich_worker, urgent_worker, conversation_off and mech_fcfs, all
# apart), the eight mechanisms apart from each other, the LLM conditions apart from each other.
CONDITION_SLOTS: dict[str, int] = {
    "base": 0,
    "memory_off": 1,
    "deadline_10": 2,
    "deadline_15": 3,
    "deadline_20": 4,
    "budget_1500": 5,
    "rich_worker": 6,
    "urgent_worker": 7,
    "fixed_bids": 8,
    "conversation_off": 9,
    "rule_makers": 3,
    "rule_makers_memory_off": 4,
    "bids_flat": 5,
    "mech_fcfs": 2,
    "mech_edf": 5,
    "mech_sjf": 8,
    "mech_round_robin": 9,
    "mech_first_price": 3,
    "mech_second_price": 4,
    "mech_proportional_share": 6,
    "mech_mixed_deadlines": 7,
    "reasoning_low": 2,
    "reasoning_medium": 3,
    "reasoning_high": 4,
    "reasoning_effort": 5,
    "llm_negotiators": 6,
    "llm_solvers": 7,
    "local_llm": 8,
    "real_tasks_oracle": 9,
}
# sizes in pixels: one panel of a faceted chart, a chart alone, one row of a Gantt or bar list
PANEL_WIDTH = 150
PANEL_HEIGHT = 200
WIDE_WIDTH = 420
MAX_WIDTH = 1000  # no chart wider than a page: a wider one scrolls sideways or shrinks illegibly
ROW_HEIGHT = 26
# Vega-Lite's defaults (10-11 px) are small on screen and in shared pages
FONT_SIZES: dict[str, dict[str, Any]] = {
    "axis": {"labelFontSize": 12, "titleFontSize": 13},
    "legend": {"labelFontSize": 12, "titleFontSize": 13},
    "header": {"labelFontSize": 12, "titleFontSize": 13},
    "title": {"fontSize": 15},
}
NONE = "none"  # the word a figure writes where nothing happened
MIN_SEEDS = 5  # a mean or an interval over fewer seeds is flagged on the chart itself
CI_NOTE = "95% CI: expanded percentile bootstrap over seeds"  # mbb.analysis.stats.bootstrap_ci


def seeds_subtitle(seeds: Iterable[int], first: str = "") -> list[str]:
    """A chart's subtitle lines: `first`, the interval drawn (`CI_NOTE`), and a visible warning
    when a mean rests on fewer than `MIN_SEEDS` seeds (or has no interval at all).

    seeds: the number of seeds behind each mean drawn; first: a line to lead with."""
    ns = [int(n) for n in seeds if n is not None]
    lines = [first] if first else []
    lines.append(f"mean over seeds; {CI_NOTE}")
    if ns and min(ns) < MIN_SEEDS:
        least = min(ns)
        lines.append(
            f"⚠ {sum(n < MIN_SEEDS for n in ns)} of {len(ns)} means rest on fewer than "
            f"{MIN_SEEDS} seeds (as few as {least}"
            + ("; one seed has no interval" if least < 2 else "")
            + "): read them as anecdotes"
        )
    return lines


def worker_key(worker: str) -> tuple[int, str]:
    """Sort key putting W2 before W10 (the number in the id; ids without one go last)."""
    digits = "".join(ch for ch in worker if ch.isdigit())
    return (int(digits) if digits else 10**9, worker)


def worker_order(workers: Iterable[str]) -> list[str]:
    """The distinct workers in figure order (W1, W2, ... W10, then ids without a number)."""
    return sorted({w for w in workers if w is not None}, key=worker_key)


def worker_color(workers: Iterable[str]) -> alt.Scale:
    """One colour per worker, identical in every figure for the same population."""
    import altair as alt

    domain = worker_order(workers)
    return alt.Scale(domain=domain, range=[_at(WORKER_PALETTE, i) for i in range(len(domain))])


def model_color(models: Iterable[str]) -> alt.Scale:
    """One colour per model (or persona), identical in every figure."""
    import altair as alt

    domain = sorted({m for m in models if m is not None})
    return alt.Scale(domain=domain, range=[_at(MODEL_PALETTE, i) for i in range(len(domain))])


def category_color(levels: Iterable[str], sort: bool = True) -> alt.Scale:
    """One `CATEGORY_PALETTE` colour per level of a kind that is neither a condition, a worker,
    a model nor a mechanism (phases, roles, measures, strategy groups, ...).

    levels: the levels the chart draws; sort: order them by name (else as given, first seen)."""
    import altair as alt

    seen = [v for v in dict.fromkeys(levels) if v is not None]
    domain = sorted(seen) if sort else seen
    return alt.Scale(domain=domain, range=[_at(CATEGORY_PALETTE, i) for i in range(len(domain))])


def _at(palette: tuple[str, ...], i: int) -> str:
    return palette[i % len(palette)]


def condition_hex(cell: str) -> str:
    """The colour of a condition (or of a cell, `condition.role-model`: its condition part), the
    same in every chart: a shipped condition's slot in `CONDITION_SLOTS`, any other name's
    CRC-32 (a stable hash: the same in every process and notebook), modulo the palette.

    cell: a condition or cell name as the runs record it."""
    import zlib

    from mbb.analysis.runs import condition_part

    name = condition_part(cell)
    slot = CONDITION_SLOTS.get(name, zlib.crc32(name.encode("utf-8")))
    return PALETTE[slot % len(PALETTE)]


def condition_color(conditions: Iterable[str]) -> alt.Scale:
    """The condition colour scale of every mbb chart (mbb's choice): a condition's colour
    follows from its name alone (`condition_hex`), so it is the same in every chart of every
    notebook of a report whichever subset of conditions a chart draws, for the shipped names
    and for a study's own cell names alike. Cells of one condition (one per role or model)
    share its colour. There are more names than colours, so two conditions can share one:
    `condition_dash` then dashes them apart on the charts that draw lines, and
    `shared_colour_note` says so in the subtitle of every chart that colours by condition.

    conditions: the condition (or cell) names the chart draws; the scale's domain, sorted."""
    import altair as alt

    domain = sorted({c for c in conditions if c is not None})
    return alt.Scale(domain=domain, range=[condition_hex(c) for c in domain])


def condition_dash(conditions: Iterable[str]) -> alt.Scale:
    """Line dashes for the conditions a chart draws: solid for the first (in name order) of
    each colour, then `DASHES` in turn for the others sharing it, so two lines of one colour
    never share a dash too.

    conditions: the condition (or cell) names the chart draws."""
    import altair as alt

    domain = sorted({c for c in conditions if c is not None})
    seen: dict[str, int] = {}
    dashes = []
    for c in domain:
        k = seen[condition_hex(c)] = seen.get(condition_hex(c), -1) + 1
        dashes.append(list(DASHES[k % len(DASHES)]))
    return alt.Scale(domain=domain, range=dashes)


def shared_colour_note(conditions: Iterable[str]) -> list[str]:
    """Subtitle lines saying which drawn names share a colour (none: no line), since
    `condition_color` gives a name its colour whatever else a chart draws: cells of one
    condition (a study's roles and models) in one line, however many; conditions whose names
    fall on one colour by name, at most four groups of them, the rest counted.

    conditions: the condition (or cell) names the chart draws."""
    from mbb.analysis.runs import condition_part

    by_colour: dict[str, list[str]] = {}
    for c in sorted({c for c in conditions if c is not None}):
        by_colour.setdefault(condition_hex(c), []).append(c)
    cells = False
    groups = []
    for names in by_colour.values():
        parts = sorted({condition_part(n) for n in names})
        cells = cells or len(parts) < len(names)
        if len(parts) > 1:
            groups.append(" and ".join(parts))
    lines = []
    if cells:
        lines.append("the cells of one condition share its colour (hover a mark for its cell)")
    if groups:
        more = f"; {len(groups) - 4} more such groups" if len(groups) > 4 else ""
        lines.append(
            f"⚠ same colour: {'; '.join(groups[:4])}{more} (hover a mark for its condition)"
        )
    return lines


def none_layer(x: Any, y: Any, flag: str = "empty") -> alt.Chart:
    """A text layer writing "none" at (`x`, `y`) on the rows whose `flag` column is true: the
    figure adds one such row per panel where nothing happened, so a faceted chart that layers
    this never shows a blank panel.

    x, y: the position, as altair encodings or `alt.value(pixels)`.
    flag: the boolean column marking the rows of empty panels.
    """
    import altair as alt

    return (
        alt.Chart()
        .mark_text(text=NONE, fontSize=14, fontStyle="italic", color="#666")
        .encode(x=x, y=y)
        .transform_filter(f"datum.{flag} === true")
    )


def with_empty_panels(df: pl.DataFrame, panels: pl.DataFrame) -> pl.DataFrame:
    """`df` with a boolean `empty` column (false on its rows) plus one row with `empty` true
    for each row of `panels` (the panel keys every panel should have) absent from `df`; draw
    `df`'s marks on the rows where `empty` is not true and `none_layer` on the others.

    df: the rows a faceted chart draws.
    panels: one row per panel the chart must show, with the facet columns only.
    """
    import polars as pl

    keys = panels.columns
    missing = panels.unique().join(df.select(keys).unique(), on=keys, how="anti")
    out = df.with_columns(pl.lit(False).alias("empty"))
    if missing.is_empty():
        return out
    filler = missing.with_columns(pl.lit(True).alias("empty"))
    return pl.concat([out, filler], how="diagonal_relaxed")


def none_chart(title: str, reason: str, width: int = WIDE_WIDTH, height: int = 120) -> alt.Chart:
    """A chart that says "none" and why, for a figure whose data has no rows at all.

    title: the title the figure would have had.
    reason: what did not happen (shown under the title).
    width, height: the size of the empty plot area in pixels.
    """
    import altair as alt

    return (
        alt.Chart(alt.Data(values=[{"text": NONE}]))
        .mark_text(fontSize=16, fontStyle="italic", color="#666")
        .encode(text="text:N")
        .properties(width=width, height=height, title={"text": title, "subtitle": reason})
    )
