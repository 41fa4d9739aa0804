from __future__ import annotations

import pytest

from mbb import figures, render

FIGURES = [
    figures.resource_timeline,
    figures.bids_by_round,
    figures.budgets_over_rounds,
    figures.outcomes_by_subrun,
]


@pytest.mark.parametrize("fig", FIGURES, ids=lambda f: f.__name__)
def test_figure_renders_offline(fig, base_batch, tmp_path):
    chart = fig(base_batch.tables)
    spec = chart.to_dict()
    assert spec.get("title") or any("title" in str(v) for v in spec.values())
    paths = render.save_chart(chart, tmp_path / fig.__name__)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths["svg"].read_text()


def test_worker_colours_are_consistent_across_figures(base_batch):
    def scale(spec):
        found = []

        def walk(node):
            if isinstance(node, dict):
                if node.get("field") == "worker" and "scale" in node:
                    found.append((tuple(node["scale"]["domain"]), tuple(node["scale"]["range"])))
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(spec)
        return set(found)

    scales = set()
    for fig in (figures.resource_timeline, figures.bids_by_round, figures.budgets_over_rounds):
        scales |= scale(fig(base_batch.tables).to_dict())
    assert len(scales) == 1
    ((domain, colours),) = scales
    assert domain == ("W1", "W2", "W3", "W4", "W5")
    assert len(set(colours)) == 5


def test_worker_colour_order_is_numeric():
    s = figures.worker_color(["W10", "W2", "W1"])
    assert s.domain == ["W1", "W2", "W10"]
