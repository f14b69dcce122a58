"""The reproductions' confidence intervals (dcplace.bench.stats): the t quantiles, the interval, paired margins."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dcplace.bench.stats import Interval, interval, interval_from_moments, paired_margin, t975


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
