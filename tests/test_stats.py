"""Aggregators: hand-computed means, hierarchical macro averages, bootstrap CIs, paired differences."""

from __future__ import annotations

import numpy as np
import pytest

from worldrecall.core.data import ScoreRow
from worldrecall.plugins.stats.aggregators import (
    BootstrapAggregator,
    MacroAggregator,
    MeanAggregator,
    PairedAggregator,
)
from worldrecall.plugins.stats.hierarchy import bootstrap_macro, macro_mean


def _rows(model, values, strata):
    return [ScoreRow("b", model, f"c{i}", "b.m", {"v": v}, strata=s) for i, (v, s) in enumerate(zip(values, strata))]


STRATA = [{"subcategory": "s1", "domain": "d1"}, {"subcategory": "s1", "domain": "d1"},
          {"subcategory": "s2", "domain": "d1"}, {"subcategory": "s3", "domain": "d2"}]


def test_macro_mean_by_hand():
    # s1 = (1 + 3)/2 = 2, s2 = 5 -> d1 = (2 + 5)/2 = 3.5; s3 = 9 -> d2 = 9; overall = (3.5 + 9)/2 = 6.25
    vals = np.array([1.0, 3.0, 5.0, 9.0])
    keys = [np.array(["s1", "s1", "s2", "s3"]), np.array(["d1", "d1", "d1", "d2"])]
    assert macro_mean(vals, keys) == pytest.approx(6.25)
    assert macro_mean(np.array([1.0, np.nan, 5.0, 9.0]), keys) == pytest.approx(((1 + 5) / 2 + 9) / 2)
    assert macro_mean(vals, []) == pytest.approx(4.5)


def test_macro_mean_refuses_a_duplicate_case_id():
    # the release's aggregate_hierarchy raises on a repeated case_id; averaging the copies (1 and 2 -> 1.5)
    # would silently weigh that case twice. Unique ids give the plain macro mean.
    keys = [np.array(["s1", "s1"]), np.array(["d1", "d1"])]
    assert macro_mean(np.array([1.0, 2.0]), keys, ["c1", "c2"]) == pytest.approx(1.5)
    with pytest.raises(ValueError, match=r"^duplicate case_id 'c1': aggregate repeated observations within "
                                         r"each case first$"):
        macro_mean(np.array([1.0, 2.0]), keys, ["c1", "c1"])
    with pytest.raises(ValueError, match="duplicate case_id 'c1'"):  # a null value does not hide the copy
        macro_mean(np.array([1.0, np.nan]), keys, ["c1", "c1"])


def test_mean_and_macro_tables():
    rows = _rows("m", [1.0, 3.0, 5.0, 9.0], STRATA) + [ScoreRow("b", "m", "c9", "b.m", {}, "failed", "x.mp4: bad")]
    mean = MeanAggregator().aggregate(rows, {})
    assert mean["mean"]["mean"].item() == pytest.approx(4.5) and mean["mean"]["n"].item() == 4
    st = mean["status"].iloc[0]
    assert (st.ok, st.failed, st.skipped) == (4, 1, 0)
    macro = MacroAggregator().aggregate(rows, {"levels": ["subcategory", "domain"]})["macro"]
    assert macro["macro"].item() == pytest.approx(6.25)


def test_bootstrap_is_seeded_stratified_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    vals = list(rng.normal(0.5, 0.1, 40))
    strata = [{"subcategory": f"s{i % 4}", "domain": f"d{i % 2}"} for i in range(40)]
    rows = _rows("m", vals, strata)
    a = BootstrapAggregator().aggregate(rows, {"replicates": 500, "seed": 0})["bootstrap"].iloc[0]
    b = BootstrapAggregator().aggregate(rows, {"replicates": 500, "seed": 0})["bootstrap"].iloc[0]
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert a.ci_low < a.estimate < a.ci_high and a.ci_high - a.ci_low < 0.15
    # a stratum with a single case never varies: with one case per stratum the CI collapses to the estimate
    keys = [np.array(["s1", "s2"]), np.array(["d", "d"])]
    lo, hi = bootstrap_macro(np.array([0.2, 0.8]), keys, 100, 0)
    assert lo == pytest.approx(0.5) and hi == pytest.approx(0.5)


def test_paired_difference_on_shared_cases():
    ref = _rows("oracle", [0.9, 0.8, 0.7, 0.6], STRATA)
    bad = _rows("bad", [0.4, 0.3, 0.2], STRATA[:3])  # c3 missing: only shared cases count
    t = PairedAggregator().aggregate(ref + bad, {"reference": "oracle", "replicates": 200})["paired"]
    row = t.iloc[0]
    # every difference is -0.5 -> mean -0.5 whatever the hierarchy, CI degenerate
    assert row.model == "bad" and row.n_shared == 3
    assert row.mean_diff == pytest.approx(-0.5) and row.ci_low == pytest.approx(-0.5)


def test_the_macro_aggregator_refuses_a_case_scored_twice():
    """The release's hierarchy raises on a duplicate case id; so does the aggregator a run uses (the loader's
    dedup keeps a run from reaching it; rows merged by hand must not average a case twice)."""
    import pytest

    from worldrecall.core.data import ScoreRow
    from worldrecall.plugins.stats.aggregators import MacroAggregator

    rows = [ScoreRow("b", "m", "c1", "b.x", {"v": v}, strata={"subcategory": "s", "domain": "d"}) for v in (1.0, 2.0)]
    with pytest.raises(ValueError, match="c1"):
        MacroAggregator().aggregate(rows, {})
