"""Confidence intervals for the reproductions: the one place that computes them.

Every headline cell is a mean over independent episodes (or seeds). Its 95 % confidence interval is Student's
t-interval::

    mean ± t_{0.975, n-1} · s / sqrt(n),    s = sample standard deviation (ddof 1)

A *margin* of method A over method B measured on the same episodes (common random numbers: the reproductions seed
episode ``i`` identically for every policy) is the paired relative difference ``a_i / b_i - 1``, and its interval is
the t-interval of those n paired values, so the episode-to-episode spread shared by both methods cancels.

With n = 1 there is no interval (``lo = hi = nan``); callers print the mean alone and say so.

Several policies compared with one baseline are a family of tests: at 95 % each, five comparisons call at least one
policy "ahead" by chance about a fifth of the time. :func:`holm` adjusts their p-values (Holm's step-down, which
keeps the chance of any false call at 5 % with no assumption on how the comparisons depend on each other);
:func:`paired_p` is the two-sided p-value of the paired t-test whose interval :func:`interval` gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Student's t quantile t_{0.975, df} for df = 1..30 (standard tables).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """Student's t quantile at 0.975 with ``df`` degrees of freedom (df >= 1): the table up to 30, then the
    Cornish-Fisher expansion around the normal quantile (error below 1e-4 there)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z, v = _Z975, float(df)
    return z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; converges for x < (a + 1) / (a + b
    + 2))."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):  # fmt: skip
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float, xc: float | None = None) -> float:
    """The regularized incomplete beta function I_x(a, b) (a, b > 0, 0 <= x <= 1), by its continued fraction.
    ``xc``: 1 - x where the caller has it more exactly than the subtraction gives (x near 1)."""
    if not (0.0 <= x <= 1.0):
        raise ValueError(f"x must be in [0, 1], got {x}")
    xc = 1.0 - x if xc is None else xc
    if x == 0.0 or xc == 0.0:
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(xc))
    if x < (a + 1) / (a + b + 2):
        return min(1.0, front * _betacf(a, b, x) / a)
    return max(0.0, 1.0 - front * _betacf(b, a, xc) / b)


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom: ``I_{df / (df + t^2)}(df / 2, 1 / 2)``."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if math.isinf(t):
        return 0.0
    return betainc(df / 2, 0.5, df / (df + t * t), t * t / (df + t * t))


def paired_p(differences: Sequence[float] | np.ndarray) -> float:
    """The two-sided p-value of the paired t-test that the mean of ``differences`` is 0 (the test whose 95 %
    interval :func:`interval` gives: it leaves zero exactly when p < 0.05, up to the t table's 3 decimals). nan with
    fewer than 2 values or any that is not finite; 1 where every difference is 0, 0 where they are all equal and not
    0 (:func:`no_spread`: the t-test has nothing to say there, and callers decide such rows otherwise)."""
    x = np.asarray(differences, dtype=float)
    n = len(x)
    if n < 2 or not np.isfinite(x).all():
        return math.nan
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    if no_spread(sd, mean):
        return 1.0 if mean == 0 else 0.0
    return t_two_sided_p(mean / (sd / math.sqrt(n)), n - 1)


def no_spread(spread: float, mean: float) -> bool:
    """Whether values with this spread (a standard deviation or an interval's width) about ``mean`` are all the
    same but for rounding (0.1 + 0.2 against 0.3): what a t-test cannot judge. The one rule for :func:`paired_p`
    and :class:`dcplace.bench.compare.PolicyRow`, which send such rows to a sign test (with exact zero alone, a
    constant gap with rounding noise got p = 0 from 2 episodes)."""
    return spread <= 1e-9 * abs(mean)


def sign_test_p(wins: int, losses: int) -> float:
    """The two-sided sign test's p-value of ``wins`` against ``losses`` (ties dropped): ``2 P(X <= min)`` for X
    binomial(wins + losses, 1/2), at most 1."""
    n, k = wins + losses, min(wins, losses)
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * sum(math.comb(n, i) for i in range(k + 1)) * 0.5**n)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (nan: not a test, kept nan and not counted): the i-th
    smallest of m is multiplied by m - i + 1, then made non-decreasing in that order and cut at 1. Rejecting where
    the adjusted value is below alpha keeps the family-wise error at alpha."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    out = [math.nan] * len(pvalues)
    m, running = len(tested), 0.0
    for k, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out


@dataclass(frozen=True)
class Interval:
    """A mean and its 95 % t-interval over ``n`` values (``lo``, ``hi`` nan when n < 2)."""

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def half(self) -> float:
        """Half-width of the interval (nan when n < 2)."""
        return (self.hi - self.lo) / 2

    def fmt(self, digits: int = 1, scale: float = 1.0, pct: bool = False) -> str:
        """``mean [lo, hi]`` (values times ``scale``; ``pct``: as signed percentages)."""

        def f(x: float) -> str:
            raw = x * 100 if pct else x * scale
            d = digits
            while pct and round(raw, d) == 0 and raw != 0 and d < digits + 3:  # "+0.0 %" by "significantly ahead"
                d += 1
            if round(raw, d) == 0:  # zero at every precision tried: as zero, at the precision asked
                d = digits
            v = round(raw, d) + 0.0  # + 0.0: what rounds to zero prints no sign
            return f"{v:+.{d}f} %" if pct else f"{v:,.{d}f}"

        if self.n < 2 or math.isnan(self.lo):
            return f"{f(self.mean)} (n={self.n})"
        return f"{f(self.mean)} [{f(self.lo)}, {f(self.hi)}]"


def interval(values: Sequence[float] | np.ndarray, within: tuple[float, float] | None = None) -> Interval:
    """The mean of ``values`` and its 95 % t-interval; ``within``: the range the quantity cannot leave (an
    acceptance's ``(0, 1)``), to which the interval is cut: the true mean lies in it, so the cut interval covers it
    whenever the t-interval does (at 2 episodes a t-interval of acceptances ran past 1)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    half = t975(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if within is not None:
        lo, hi = max(lo, within[0]), min(hi, within[1])
    return Interval(mean, lo, hi, n)


def paired_margin(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> Interval:
    """A over B on the same episodes: the t-interval of ``a_i / b_i - 1`` (a fraction; +0.05 is 5 % more)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired values need the same episodes, got {x.shape} and {y.shape}")
    return interval(x / y - 1.0)


def interval_from_moments(mean: float, std: float, n: int, ddof: int = 0) -> Interval:
    """The t-interval from a recorded mean and standard deviation (``ddof`` the one it was computed with: 0 for
    ``np.std``'s default) over ``n`` values, for records that kept moments rather than the values."""
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    sample_std = std * math.sqrt((n - ddof) / (n - 1))
    half = t975(n - 1) * sample_std / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)
