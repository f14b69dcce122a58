"""The reproductions' confidence intervals (dcplace.bench.stats): the t quantiles, the interval, paired margins."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dcplace.bench.stats import (
    Interval,
    betainc,
    holm,
    interval,
    interval_from_moments,
    paired_margin,
    paired_p,
    t975,
    t_two_sided_p,
)


@pytest.mark.parametrize(("df", "want"), [(1, 12.706), (4, 2.776), (30, 2.042), (31, 2.0395), (60, 2.0003),
                                          (120, 1.9799), (10_000, 1.9602)])  # fmt: skip
def test_t_quantiles_match_the_tables(df, want):
    assert t975(df) == pytest.approx(want, abs=2e-3)


def test_interval_by_hand():
    iv = interval([1.0, 2.0, 3.0, 4.0, 5.0])  # mean 3, s = sqrt(2.5), t(4) = 2.776
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)
    assert (iv.mean, iv.n) == (3.0, 5) and iv.lo == pytest.approx(3 - half) and iv.hi == pytest.approx(3 + half)
    assert "3.0 [1.0, 5.0]" == iv.fmt(1)
    one = interval([7.0])
    assert one.n == 1 and math.isnan(one.lo) and one.fmt(0) == "7 (n=1)"


def test_moments_give_the_same_interval_as_the_values():
    x = np.array([3.0, 9.0, 4.0, 12.0, 5.5, 7.0])
    a, b = interval(x), interval_from_moments(float(x.mean()), float(x.std()), len(x))
    assert (a.lo, a.hi) == pytest.approx((b.lo, b.hi))


def test_paired_margin_cancels_the_shared_spread():
    base = np.array([100.0, 1000.0, 400.0, 2500.0])  # episodes differ a lot
    iv = paired_margin(base * 1.05, base)  # A is 5 % ahead on every episode
    assert iv.mean == pytest.approx(0.05) and iv.hi - iv.lo == pytest.approx(0.0, abs=1e-12)
    assert iv.fmt(1, pct=True) == "+5.0 % [+5.0 %, +5.0 %]"
    with pytest.raises(ValueError, match="same episodes"):
        paired_margin([1.0, 2.0], [1.0])


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=40))
def test_the_interval_holds_the_mean_and_is_symmetric(xs):
    iv = interval(xs)
    assert iv.lo <= iv.mean <= iv.hi
    assert iv.mean - iv.lo == pytest.approx(iv.hi - iv.mean, abs=1e-6)


def test_what_rounds_to_zero_prints_without_a_minus():
    """-0.0001 as a percentage with one digit was "-0.0 %" in the report; a percentage that is not zero takes up to
    three more digits rather than print as zero ("[+0.0 %, +4.6 %]" stood beside "significantly ahead")."""
    iv = Interval(-0.00001, -0.0004, 0.0003, 5)
    assert iv.fmt(1, pct=True) == "-0.001 % [-0.04 %, +0.03 %]"
    assert Interval(0.0, 0.0003, 0.046, 5).fmt(1, pct=True) == "+0.0 % [+0.03 %, +4.6 %]"
    assert Interval(1e-9, -1e-9, 2e-9, 5).fmt(1, pct=True) == "+0.0 % [+0.0 %, +0.0 %]"  # below 0.0001 %: zero
    assert Interval(-0.01, -0.04, 0.02, 3).fmt(1) == "0.0 [0.0, 0.0]"
    assert Interval(-0.06, -0.09, -0.05, 3).fmt(1, pct=True) == "-6.0 % [-9.0 %, -5.0 %]"


def test_a_share_interval_stays_within_zero_and_one():
    """Two acceptances of 0.99 and 0.6 gave a t-interval past 1; cut to the range, the mean is untouched."""
    raw, cut = interval([0.99, 0.6]), interval([0.99, 0.6], within=(0.0, 1.0))
    assert raw.hi > 1 and raw.lo < 0
    assert cut.mean == raw.mean and (cut.lo, cut.hi) == (0.0, 1.0) and cut.n == 2
    assert interval([0.5, 0.52, 0.51], within=(0.0, 1.0)) == interval([0.5, 0.52, 0.51])


@given(st.floats(0, 1), st.floats(0.2, 20))
def test_the_incomplete_beta_function_where_it_has_a_closed_form(x, a):
    assert betainc(1, 1, x) == pytest.approx(x, abs=1e-12)
    assert betainc(a, 1, x) == pytest.approx(x**a, abs=1e-10)
    assert betainc(1, a, x) == pytest.approx(1 - (1 - x) ** a, abs=1e-10)
    # I_x(a, b) = 1 - I_(1-x)(b, a)
    assert betainc(a, a + 1, x) + betainc(a + 1, a, 1 - x, x) == pytest.approx(1, abs=1e-10)
    assert betainc(2, 3, 0.4) == pytest.approx(0.5248, abs=1e-12)  # sum of binomial terms, by hand


@pytest.mark.parametrize("df", [*range(1, 61), 120, 10_000])
def test_the_p_value_at_the_tables_quantile_is_five_percent(df):
    """The p-value and the interval are one test: at t975(df) the two-sided p-value is 0.05 (the table's 3 decimals
    leave at most 5e-5 of it)."""
    assert t_two_sided_p(t975(df), df) == pytest.approx(0.05, abs=5e-5)


@given(st.floats(-1e3, 1e3))
def test_the_p_value_where_student_t_has_a_closed_form(t):
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(abs(t)), abs=1e-10)  # Cauchy
    assert t_two_sided_p(t, 2) == pytest.approx(1 - abs(t) / math.sqrt(2 + t * t), abs=1e-10)


def test_paired_p_by_hand_and_its_edges():
    assert paired_p([1, 2, 3, 4]) == pytest.approx(0.030466, abs=1e-6)  # t = 3.873, df = 3
    assert paired_p([0, 0, 0]) == 1.0 and paired_p([2, 2, 2]) == 0.0 and math.isnan(paired_p([1.0]))


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=30))
def test_a_lone_comparison_p_value_says_what_its_interval_says(diffs):
    """p < 0.05 exactly where the 95 % interval leaves zero (but within the t table's rounding of the boundary)."""
    p, iv = paired_p(diffs), interval(diffs)
    if iv.lo == iv.hi or abs(p - 0.05) < 1e-4:
        return
    assert (p < 0.05) == (iv.lo > 0 or iv.hi < 0)


@given(st.lists(st.one_of(st.floats(0, 1), st.just(math.nan)), max_size=12))
def test_holm_adjusts_up_keeps_the_order_and_skips_what_is_not_a_test(ps):
    q = holm(ps)
    tested = [(p, a) for p, a in zip(ps, q, strict=True) if not math.isnan(p)]
    assert all(math.isnan(a) for p, a in zip(ps, q, strict=True) if math.isnan(p))
    assert all(p <= a <= 1 for p, a in tested)
    assert all(a1 <= a2 for p1, a1 in tested for p2, a2 in tested if p1 < p2)  # the order of the p-values is kept
    if len(tested) == 1:
        assert tested[0][1] == tested[0][0]  # one test: nothing to adjust
    # Bonferroni is the most it ever asks: never above m x p
    assert all(a <= min(1.0, len(tested) * p) + 1e-12 for p, a in tested)


def test_holm_by_hand():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # 3 x 0.01, max(0.03, 2 x 0.03), then 0.04
