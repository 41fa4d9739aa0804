"""The table renderer (mbb.viz.table): numbers rounded per measure, intervals in one column,
every row shown, every string escaped, few seeds flagged, nothing silent."""

from __future__ import annotations

import polars as pl
import pytest

from mbb.viz.table import format_value, kind_of, share_text, table


def test_a_share_never_rounds_onto_done_or_nothing():
    assert share_text(0.9992) == "99.9%"
    assert share_text(0.9992, 0) == "99.9%"  # not "100%": more digits, not a rounding up
    assert share_text(0.99996) == "99.996%"
    assert share_text(0.00004) == "0.004%"
    assert share_text(1.0) == "100.0%" and share_text(0.0) == "0.0%"
    assert share_text(0.9992, 2, percent=False) == "0.999"


@pytest.mark.parametrize(
    ("name", "dtype", "kind"),
    [
        ("condition", pl.String, "text"),
        ("completion", pl.Float64, "share"),
        ("win_rate", pl.Float64, "share"),
        ("cost_per_run_usd", pl.Float64, "usd"),
        ("mean_bid", pl.Float64, "float"),
        ("calls", pl.Int64, "int"),
        ("seed", pl.Int64, "id"),
        ("valid", pl.Boolean, "bool"),
        # shares that sat as fractions beside their percent twins (a reviewer's find)
        ("resolved", pl.Float64, "share"),
        ("repeat_win_chance", pl.Float64, "share"),
        ("corrected", pl.Float64, "share"),
        ("win_rate_diff", pl.Float64, "share"),
        ("spent_diff", pl.Int64, "int"),
        # a share named first read 1.00 and 0.800 beside percentages (a reviewer's find, M7)
        ("share_of_rounds", pl.Float64, "share"),
        ("share_relational_institution", pl.Float64, "share"),
        ("shares_traded", pl.Int64, "int"),
    ],
)
def test_kinds_follow_the_measure(name, dtype, kind):
    assert kind_of(name, dtype) == kind


def test_a_difference_of_shares_reads_in_points_with_its_sign():
    text = str(table(pl.DataFrame({"win_rate_diff": [0.321], "spent_diff": [486]})))
    assert "+32.1 pp" in text and "+486" in text


def test_values_are_rounded_per_kind():
    assert format_value(0.876542, "float") == "0.877"
    assert format_value(1234.5678, "float") == "1,235"
    assert format_value(12345, "int") == "12,345"
    assert format_value(2024, "id") == "2024"
    assert format_value(0.0123, "share", signed=True) == "+1.2 pp"
    assert format_value(0.00123, "usd") == "$0.00123"
    assert format_value(12.3456, "usd") == "$12.35"
    assert format_value(None, "float") == "n/a"
    assert format_value(float("nan"), "share") == "n/a"


def _frame(rows: int = 54) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "condition": [f"c{i}" for i in range(rows)],
            "measure": ["completion", "mean_bid"] * (rows // 2),
            "n": [1 if i == 0 else 8 for i in range(rows)],
            "mean": [0.5 + i / 1000 for i in range(rows)],
            "ci_low": [None if i == 0 else 0.41 for i in range(rows)],
            "ci_high": [None if i == 0 else 0.63 for i in range(rows)],
        }
    )


def test_every_row_is_shown_and_intervals_are_one_column():
    df = _frame()
    t = table(df, measure_column="measure")
    page = t.to_html()
    assert page.count("<tr>") == 1 + 54  # the header and every row: nothing behind "…"
    assert "shape:" not in page and "…" not in page and "&quot;" not in page
    assert "mean [95% CI]" in page
    cells = t.cells()
    assert cells[1][3] == "0.501 [0.410, 0.630]"  # a bid: three significant digits
    assert cells[2][3] == "50.2% [41.0%, 63.0%]"  # a share: a percentage
    assert cells[0][3] == "50.0% [n/a (1 seed)]"  # an interval of one seed says why it is none
    assert "max-height:32em" in page and "overflow:auto" in page  # long tables scroll
    text = str(t)
    assert "c53" in text and "0.41" not in text.splitlines()[2]


def test_few_seeds_are_flagged_in_the_caption():
    t = table(_frame(4))
    assert any("fewer than 5 seeds" in n and "as few as 1" in n for n in t.notes)
    assert "fewer than 5 seeds" in t.to_html()
    assert not table(_frame(4).filter(pl.col("n") > 1)).notes
    corpus = pl.DataFrame({"category": ["a"], "n": [3], "f1": [0.5]})
    assert not table(corpus, seeds=None).notes  # item counts are not seeds


def test_few_seeds_warning_says_seeds_with_a_value_and_n_a():
    """A row no seed could compute is n/a, not a mean over "as few as 0" seeds; with the n/a
    count beside `n` (`condition_table`'s `n_na`) the warning says both."""
    df = pl.DataFrame(
        {"measure": ["a", "b", "c", "d"], "n": [4, 2, 0, 5], "n_na": [0, 2, 4, 0], "mean": 1.0}
    )
    (note,) = table(df).notes
    assert "as few as 0" not in note
    assert (
        "2 of 4 row(s) rest on fewer than 5 seeds with a value (as few as 2 with a value, 2 n/a;"
        " 1 of these rows have seeds whose value is n/a (up to 2))" in note
    )
    assert "1 of 4 row(s) have no seed with a value (4 seeds n/a): not computable" in note
    (plain,) = table(df.drop("n_na")).notes  # without the n/a count: still not "0 seeds"
    assert "as few as 2 with a value)" in plain and "1 of 4 row(s) have no seed" in plain
    # the fewest with no n/a seed says no "0 n/a" (a reviewer read "(as few as 3 with a value,
    # 0 n/a)" as odd, L3)
    (fewest,) = table(df.with_columns(pl.Series("n_na", [0, 0, 4, 0]))).notes
    assert "(as few as 2 with a value)" in fewest and "0 n/a" not in fewest


def test_strings_are_escaped():
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    df = pl.DataFrame({"condition": [hostile], "note": ["a & b"], "value": [1.0]})
    page = table(df, caption="<b>cap</b>", labels={"value": "<i>v</i>"}).to_html()
    assert "<script>" not in page and "<img" not in page and "<b>cap" not in page
    assert "<i>v" not in page
    assert "&lt;script&gt;" in page and "a &amp; b" in page


def test_notebooks_get_html_and_terminals_text():
    t = table(pl.DataFrame({"condition": ["base"], "completion": [0.25]}))
    assert t._repr_html_().startswith("<style>")
    assert "25.0%" in repr(t)


def test_the_model_column_says_it_holds_a_persona_for_scripted_workers():
    """mbb's tables name a scripted worker's persona under `model`: the header says so."""
    assert "model / persona" in str(table(pl.DataFrame({"model": ["price_first"]})))
    assert "model / persona" not in str(
        table(pl.DataFrame({"model": ["x"]}), labels={"model": "m"})
    )


def test_to_csv_does_not_carry_a_worker_name_as_a_formula():
    # a colleague's worker name reaches the exported CSV: a spreadsheet must show it as text
    t = table(pl.DataFrame({"worker": ['=HYPERLINK("http://x/")', "W2"], "bid": [1, 2]}))
    rows = pl.read_csv(t.to_csv().encode())
    assert rows["worker"].to_list() == ['\'=HYPERLINK("http://x/")', "W2"]
    assert rows["bid"].to_list() == [1, 2]
