"""When the report calls a B/A a difference: one rule, the same for one run or many, with a stated error rate.

What varies. Both sides replay the same sessions (the dataset's), run after run, so a figure moves for two reasons:
- which sessions stand behind it (within a run): a cluster bootstrap resamples whole sessions, BOOTSTRAP times
  from a fixed seed, stratified by config (a figure pooled over configs keeps each config's sessions; the sessions of
  a scenario-1 or -2 config share their turns, so a resample keeps the turn mix). For a B/A the same sessions are
  drawn on both sides: both sides ran them (a paired design), so what the sessions have in common cancels and what
  differs between the engines session by session stays;
- run to run (a busy host, clocks, the order sessions raced in): each side's per-run values, their variance pooled
  over both sides (on the log scale of the B/A), with runs - 2 degrees of freedom.
A figure is the mean over runs of each run's value. The standard error of its log (of log B/A for a B/A) is the two
added, the sessions' (the bootstrap's variance) and the runs' (the per-run values' variance / runs), with
Welch-Satterthwaite degrees of freedom (sessions - strata for the first, runs - 1, or runs - 2 for a B/A, for the
second); its 95 % interval is the t interval on that log scale (it stays positive; a hit ratio's is cut at 100).
Both parts count the requests' own noise, so the rule leans to "not shown".

The unit of replication is the session for what the server counts (hit ratios, tokens: a run's luck, such as which
session's prefill finished first, falls on sessions one by one, and the paired sessions show it) and the run for
what a clock measures (Measure.clocked: times, and the rates of whole runs): a run's host and clocks move every
request in it together, which no resampling of its sessions can show, so a time needs MIN_RUNS runs a side to be
told apart from its host.

A difference. A B/A is a difference when its interval lies beyond its margin (stats.MARGIN, HIT_MARGIN: the smallest
B/A worth a claim), above 1 + margin or below 1 / (1 + margin): a t test of |log B/A| <= log(1 + margin), whose
p-value is below ALPHA exactly when the interval lies beyond. The report's tests are corrected by Benjamini-Hochberg
at ALPHA in two families (report.Tests: the summary's headline figures, and the tables' other B/A): when A and B do
not differ (an A/A comparison), each family claims any difference with probability at most ALPHA; of the differences
it claims, ALPHA are expected false. A zero spread
is no special case: equal values are no difference; values apart beyond the margin in every session and run are one.

An interval is shown only where it says something. The runs' spread needs MIN_INTERVAL_RUNS runs a side to be
estimated: from two runs, one side's figure has one degree of freedom (t = 12.7), and a 2.6-fold gap between two
runs' TTFT p95 becomes an interval over five orders of magnitude; a B/A pools both sides' spreads over 2 degrees of
freedom (t = 4.30), and the same gap on both sides still spans more than two. So an interval is informative when its
Welch-Satterthwaite degrees of freedom reach what MIN_INTERVAL_RUNS runs a side give the runs' part (2 for a side's
figure, 4 for a B/A) and, with fewer runs, its runs' part is at most RUNS_SHARE of its variance (its sessions carry
it): a hit ratio whose runs agree shows its interval from one run on; a time that two runs spread does not. One that
is not keeps its interval in the data, flagged, with the runs that would make it informative (needs_runs; None where
its sessions, not its runs, hold it back), and the report prints that instead of the range. The test is not touched:
the same t on the same degrees of freedom, and a B/A whose interval lies beyond its margin is a difference, and
shows its interval, however few its degrees of freedom.

Too few to tell (no interval, no test): a figure of requests over fewer than MIN_SESSIONS sessions (with data on both
sides, for a B/A); a time, or a figure of whole runs (throughput, a KV peak), with fewer than MIN_RUNS runs on a
side; a value of 0 (no ratio).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np

from .runs import RequestRecord
from .stats import Figure, Measure, Ratio, ratio

__all__ = [
    "ALPHA",
    "BOOTSTRAP",
    "BOOTSTRAP_SEED",
    "MIN_INTERVAL_RUNS",
    "MIN_RUNS",
    "MIN_SESSIONS",
    "benjamini_hochberg",
    "compare",
    "figure",
    "run_compare",
    "run_figure",
    "t_quantile",
    "t_two_sided_p",
]

ALPHA = 0.05
MIN_SESSIONS = 8  # fewer and the sessions' resamples are too few to trust (e2e/suites/aa_simulation.py measured it)
MIN_RUNS = 2  # a figure of whole runs has one value per run: it needs two a side to have a spread
MIN_INTERVAL_RUNS = 3  # an interval the runs' spread holds up is shown from this many runs a side: see the docstring
RUNS_SHARE = 0.5  # with fewer, it is shown where the runs' spread is at most this share of its variance
BOOTSTRAP = 1000
BOOTSTRAP_SEED = 20240522
_CELLS = 4_000_000  # request weights held at once: resamples are drawn in batches under this
_EXACT_ROWS = 4096  # a quantile over more rows is resampled over QUANTILE_CUTS cut points of its sorted values
QUANTILE_CUTS = 2048
_ONE_RUN = f"a time, and one run a side: {MIN_RUNS} needed"


# Student's t, for the intervals and the tests (numpy has none; scipy is not a dependency).


def _abs_cdf(t: float, nu: int) -> float:
    """P(|T| < t) for Student's t with nu >= 1 degrees of freedom (Abramowitz and Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(nu))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if nu % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + (2 4)/(3 5) cos^4 + ...)), nu - 2 terms after 1
        total, term = (1.0 if nu > 1 else 0.0), 1.0
        for k in range(1, (nu - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return min(1.0, (2 / math.pi) * (theta + s * math.cos(theta) * total))
    total, term = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + (1 3)/(2 4) cos^4 + ...)
    for k in range(1, nu // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return min(1.0, s * total)


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) with df degrees of freedom, rounded down to a whole number (the conservative side); past
    1,000 the normal's."""
    t = abs(t)
    if math.isinf(df) or df >= 1000:
        return math.erfc(t / math.sqrt(2))
    return max(0.0, 1.0 - _abs_cdf(t, max(1, int(df))))


@lru_cache(maxsize=4096)
def _quantile(nu: int, alpha: float) -> float:
    low, high = 0.0, 1e4
    for _ in range(200):
        middle = (low + high) / 2
        if t_two_sided_p(middle, nu) > alpha:
            low = middle
        else:
            high = middle
    return high


def t_quantile(df: float, alpha: float = ALPHA) -> float:
    """The t whose two-sided p-value is alpha (12.71 for 1 degree of freedom, 4.30 for 2, 1.96 past 1,000)."""
    return _quantile(1000 if math.isinf(df) or df >= 1000 else max(1, int(df)), alpha)


def _combined(parts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(variance, degrees of freedom) of a sum of independent variance estimates, each (variance, its df):
    Welch-Satterthwaite; infinite df when the sum is 0."""
    parts = [(v, df) for v, df in parts if v > 0 and df > 0]
    total = sum(v for v, _ in parts)
    if total <= 0:
        return 0.0, math.inf
    return total, total**2 / sum(v**2 / df for v, df in parts)


def _margin_p(difference: float, se: float, df: float, margin: float) -> float:
    """The p-value of |difference| <= margin (log scale): below ALPHA exactly when the t interval lies beyond."""
    excess = abs(difference) - margin
    if se <= 0:
        return 0.0 if excess > 1e-12 else 1.0
    return 1.0 if excess <= 0 else t_two_sided_p(excess / se, df)


def benjamini_hochberg(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Which of the tests are differences at false discovery rate alpha (with every null true, at most alpha
    chance of any)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    passed = 0
    for rank, i in enumerate(order, 1):
        if p_values[i] <= alpha * rank / m:
            passed = rank
    chosen = set(order[:passed])
    return [i in chosen for i in range(m)]


# The data of one measure: rows per run, each with the session it belongs to.


@dataclass
class _Side:
    runs: list[np.ndarray]  # per run with rows: (n, columns)
    clusters: list[np.ndarray]  # per run: each row's session (index into the clusters of both sides)
    _per_run: Optional[np.ndarray] = None
    _resampled: Optional[np.ndarray] = None

    @property
    def n(self) -> int:
        return sum(len(r) for r in self.runs)

    def sessions(self) -> set[int]:
        return {int(c) for found in self.clusters for c in np.unique(found)}

    def per_run(self, measure: Measure) -> np.ndarray:
        """Each run's statistic (computed once)."""
        if self._per_run is None:
            self._per_run = np.asarray(
                [_run_values(rows, ids, measure, None)[0] for rows, ids in zip(self.runs, self.clusters)]
            )
        return self._per_run

    def resampled(self, measure: Measure, counts: np.ndarray) -> np.ndarray:
        """(B,): the mean over runs of each run's statistic, for each resample of the sessions (computed once)."""
        if self._resampled is None:
            self._resampled = np.mean(
                [_run_values(rows, ids, measure, counts) for rows, ids in zip(self.runs, self.clusters)], axis=0
            )
        return self._resampled


def _sides(groups: Sequence[Sequence[Sequence[RequestRecord]]], measure: Measure) -> tuple[list[_Side], list]:
    """Each side's rows and sessions (a session is (config, session id): one id recurs in every config that
    replays its file), and the strata (the sessions of each config)."""
    keys: dict[tuple[str, str], int] = {}
    found = []
    for side in groups:
        runs, clusters = [], []
        for group in side:
            rows, ids = [], []
            for r in group:
                row = measure.row(r)
                if row is not None:
                    rows.append(row)
                    ids.append(keys.setdefault((r.config, r.session), len(keys)))
            if rows:
                runs.append(np.asarray(rows, dtype=float))
                clusters.append(np.asarray(ids, dtype=np.int64))
        found.append(_Side(runs, clusters))
    by_config: dict[str, list[int]] = {}
    for (config, _), index in sorted(keys.items(), key=lambda item: item[1]):
        by_config.setdefault(config, []).append(index)
    return found, [np.asarray(v) for _, v in sorted(by_config.items())]


def _draws(strata: list[np.ndarray], clusters: int, resamples: int) -> np.ndarray:
    """(resamples, clusters): how often each session is drawn, each stratum's sessions resampled with replacement."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    counts = np.zeros((resamples, clusters))
    for members in strata:
        size = len(members)
        picks = rng.integers(0, size, size=(resamples, size)) + np.arange(resamples)[:, None] * size
        counts[:, members] = np.bincount(picks.ravel(), minlength=resamples * size).reshape(resamples, size)
    return counts


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> np.ndarray:
    """numpy's linear-interpolation percentile of `values` repeated `weights` times, for each row of weights:
    values (n,) sorted, weights (B, n) whole numbers -> (B,)."""
    cumulative = np.cumsum(weights, axis=1)
    total = cumulative[:, -1]
    last = np.maximum(total - 1, 0)
    position = q / 100.0 * last
    low = np.floor(position)
    high = np.minimum(low + 1, last)
    top = len(values) - 1
    # the value of the rank-th element (0-based) of the repeated values: the first whose cumulative count passes it
    at_low = values[np.minimum((cumulative <= low[:, None]).sum(axis=1), top)]
    at_high = values[np.minimum((cumulative <= high[:, None]).sum(axis=1), top)]
    return np.where(total > 0, at_low + (position - low) * (at_high - at_low), np.nan)


def _cut_quantile(values: np.ndarray, members: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """_weighted_quantile for many rows, to within one of QUANTILE_CUTS steps of the sorted values: each resample's
    cumulative weight is counted per session at the cut points only (counts @ per-session counts, no (B, rows)
    array), and the rank is placed between its two cuts in proportion to the weight between them."""
    n = len(values)
    cuts = np.unique(np.linspace(0, n - 1, QUANTILE_CUTS).round().astype(np.int64))
    sessions, width = counts.shape[1], len(cuts)
    cell = members * width + np.searchsorted(cuts, np.arange(n), side="left")  # (session, the cut a row falls under)
    below = np.bincount(cell, minlength=sessions * width).reshape(sessions, width).astype(float)
    cumulative = counts @ np.cumsum(below, axis=1)  # (B, cuts): weight of the rows up to each cut
    total = cumulative[:, -1]
    last = np.maximum(total - 1, 0)
    position = q / 100.0 * last
    low = np.floor(position)
    high = np.minimum(low + 1, last)

    def at(rank: np.ndarray) -> np.ndarray:
        k = np.minimum((cumulative <= rank[:, None]).sum(axis=1), len(cuts) - 1)
        before = np.where(k > 0, cumulative[np.arange(len(k)), np.maximum(k - 1, 0)], 0.0)
        span = cumulative[np.arange(len(k)), k] - before
        start = np.where(k > 0, cuts[np.maximum(k - 1, 0)] + 1, 0)
        share = np.where(span > 0, (rank - before + 1) / np.where(span > 0, span, 1), 1.0)
        index = start + np.clip(np.ceil(share * (cuts[k] - start + 1)) - 1, 0, None)
        return values[np.minimum(index.astype(np.int64), n - 1)]

    found = at(low) + (position - low) * (at(high) - at(low))
    return np.where(total > 0, found, np.nan)


def _run_values(rows: np.ndarray, clusters: np.ndarray, measure: Measure, counts: Optional[np.ndarray]) -> np.ndarray:
    """One run's statistic: (1,) over its rows, or (B,) over each resample's weights (counts: (B, clusters))."""
    if measure.of_sums is not None:
        if counts is None:
            return np.atleast_1d(measure.of_sums(rows.sum(axis=0)))
        per_cluster = np.zeros((counts.shape[1], rows.shape[1]))
        np.add.at(per_cluster, clusters, rows)
        return measure.of_sums(counts @ per_cluster)
    assert measure.quantile is not None  # a Measure is one or the other
    order = np.argsort(rows[:, 0], kind="stable")
    values, members = rows[order, 0], clusters[order]
    if counts is None:
        return np.atleast_1d(np.percentile(values, measure.quantile))
    if len(values) > _EXACT_ROWS:
        return _cut_quantile(values, members, counts, measure.quantile)
    batch = max(1, _CELLS // max(1, len(values)))
    return np.concatenate(
        [
            _weighted_quantile(values, counts[start : start + batch][:, members], measure.quantile)
            for start in range(0, len(counts), batch)
        ]
    )


def _finite_variance(values: np.ndarray) -> Optional[float]:
    """The variance of the resamples that have a value; None when fewer than half have one."""
    finite = values[np.isfinite(values)]
    return float(np.var(finite, ddof=1)) if len(finite) >= max(2, len(values) // 2) else None


def _strata_df(strata: list[np.ndarray], sessions: set[int]) -> int:
    """Degrees of freedom of a stratified cluster resample: sessions - strata (those with sessions), at least 1."""
    used = sum(1 for members in strata if sessions & set(members.tolist()))
    return max(1, len(sessions) - used)


def _too_few(sessions: int, what: str, one_run: bool) -> Optional[str]:
    """Why a figure of requests cannot be told (None: it can): too few sessions, or a time from one run a side."""
    reasons = [f"{sessions} {what}, {MIN_SESSIONS} needed"] if sessions < MIN_SESSIONS else []
    return "; ".join(reasons + ([_ONE_RUN] if one_run else [])) or None


def _shown(variance: float, df: float, runs_part: tuple[float, float], floor: int) -> dict:
    """df, informative and needs_runs of an interval of this variance on df degrees of freedom, whose runs' spread
    is `runs_part` (variance, df), `floor` the df MIN_INTERVAL_RUNS runs a side give that part. Informative: on
    at least `floor` df, and with its runs' part on fewer, that part at most RUNS_SHARE of the variance. Else
    needs_runs is MIN_INTERVAL_RUNS, or None where its runs are not what hold it back (its sessions' strata)."""
    few_runs = runs_part[0] > 0 and runs_part[1] < floor
    if (math.isinf(df) or int(df) >= floor) and not (few_runs and runs_part[0] > RUNS_SHARE * variance):
        return {"df": df, "informative": True, "needs_runs": None}
    return {"df": df, "informative": False, "needs_runs": MIN_INTERVAL_RUNS if few_runs else None}


def _interval(value: float, parts: list[tuple[float, float]], upper: Optional[float]) -> dict:
    """The t interval of a positive value from variances of its log: value x exp(-+ t se), cut at `upper`; the
    last part is the runs' spread. As a Figure's fields: low, high, df, informative, needs_runs."""
    variance, df = _combined(parts)
    half = t_quantile(df) * math.sqrt(variance)
    high = value * math.exp(half)
    low, high = value * math.exp(-half), high if upper is None else min(upper, high)
    return {"low": low, "high": high, **_shown(variance, df, parts[-1], MIN_INTERVAL_RUNS - 1)}


def _side_figure(side: _Side, measure: Measure, counts: np.ndarray, strata: list[np.ndarray]) -> Figure:
    runs, n, sessions = len(side.runs), side.n, side.sessions()
    if not runs or min(len(r) for r in side.runs) < measure.min_n:
        return Figure(None, n, repeats=runs, sessions=len(sessions))
    per_run = side.per_run(measure)
    if not np.all(np.isfinite(per_run)):
        return Figure(None, n, repeats=runs, sessions=len(sessions))
    value = float(per_run.mean())
    too_few = _too_few(
        len(sessions), f"session{'s' if len(sessions) != 1 else ''}", measure.clocked and runs < MIN_RUNS
    )
    if too_few:
        return Figure(value, n, repeats=runs, sessions=len(sessions), too_few=too_few)
    if value <= 0 or np.any(per_run <= 0):
        return Figure(value, n, repeats=runs, sessions=len(sessions), too_few="a value of 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        within = _finite_variance(np.log(side.resampled(measure, counts)))
    if within is None:
        return Figure(value, n, repeats=runs, sessions=len(sessions), too_few="too few sessions in the resamples")
    between = float(np.var(np.log(per_run), ddof=1)) / runs if runs >= 2 else 0.0
    interval = _interval(value, [(within, _strata_df(strata, sessions)), (between, runs - 1)], measure.upper)
    return Figure(value, n, repeats=runs, sessions=len(sessions), **interval)


def figure(groups: Sequence[Sequence[RequestRecord]], measure: Measure) -> Figure:
    """One side's figure of a measure over requests grouped by run: the mean over runs, with its t interval (its
    sessions and its runs); no interval (too_few) under MIN_SESSIONS sessions."""
    (side,), strata = _sides([groups], measure)
    counts = _draws(strata, sum(len(s) for s in strata), BOOTSTRAP)
    return _side_figure(side, measure, counts, strata)


def compare(
    groups_a: Sequence[Sequence[RequestRecord]], groups_b: Sequence[Sequence[RequestRecord]], measure: Measure
) -> tuple[Figure, Figure, Ratio]:
    """(A, B, B/A) of a measure over requests grouped by run on each side; the B/A with its interval and its
    p-value against the margin (undecided: the report's correction decides)."""
    (a, b), strata = _sides([groups_a, groups_b], measure)
    counts = _draws(strata, sum(len(s) for s in strata), BOOTSTRAP)
    fa, fb = _side_figure(a, measure, counts, strata), _side_figure(b, measure, counts, strata)
    return fa, fb, _ratio(a, b, fa, fb, measure, counts, strata)


def _ratio(
    a: _Side, b: _Side, fa: Figure, fb: Figure, measure: Measure, counts: np.ndarray, strata: list[np.ndarray]
) -> Ratio:
    value = ratio(fa.value, fb.value)
    if value is None:
        return Ratio(None)
    if fa.value is None or fb.value is None or fa.value <= 0 or fb.value <= 0:
        return Ratio(value, too_few="a value of 0", margin=measure.margin)
    paired = a.sessions() & b.sessions()
    too_few = _too_few(
        len(paired), "sessions on both sides", measure.clocked and min(len(a.runs), len(b.runs)) < MIN_RUNS
    )
    if too_few:
        return Ratio(value, too_few=too_few, margin=measure.margin)
    with np.errstate(divide="ignore", invalid="ignore"):
        resampled = np.log(b.resampled(measure, counts)) - np.log(a.resampled(measure, counts))
    within = _finite_variance(resampled)
    if within is None:
        return Ratio(value, too_few="too few sessions in the resamples", margin=measure.margin)
    logs = [np.log(side.per_run(measure)) for side in (a, b)]
    between, df_between = 0.0, len(a.runs) + len(b.runs) - 2
    if df_between > 0:
        pooled = sum(float(((x - x.mean()) ** 2).sum()) for x in logs) / df_between
        between = pooled * (1 / len(a.runs) + 1 / len(b.runs))
    return _tested(
        math.log(value), [(within, _strata_df(strata, paired)), (between, df_between)], measure.margin, len(paired)
    )


def _tested(difference: float, parts: list[tuple[float, float]], margin: float, sessions: int) -> Ratio:
    """The B/A of a log difference, its interval and test; the last part is the runs' spread, pooled over both
    sides (runs - 2 degrees of freedom)."""
    variance, df = _combined(parts)
    se = math.sqrt(variance)
    half = t_quantile(df) * se
    return Ratio(
        math.exp(difference),
        math.exp(difference - half),
        math.exp(difference + half),
        p=_margin_p(difference, se, df, math.log1p(margin)),
        margin=margin,
        sessions=sessions,
        **_shown(variance, df, parts[-1], 2 * (MIN_INTERVAL_RUNS - 1)),
    )


def run_figure(values: Sequence[Optional[float]], n: int, upper: Optional[float] = None) -> Figure:
    """A figure of whole runs, one value per run: the mean, and its t interval over runs (none under MIN_RUNS), cut
    at `upper` (100 for a percentage)."""
    found = [float(v) for v in values if v is not None]
    if not found:
        return Figure(None, n, repeats=0)
    value = float(np.mean(found))
    if len(found) < MIN_RUNS:
        return Figure(value, n, repeats=len(found), too_few=f"{len(found)} run, {MIN_RUNS} needed")
    if min(found) <= 0:
        return Figure(value, n, repeats=len(found), too_few="a value of 0")
    interval = _interval(value, [(float(np.var(np.log(found), ddof=1)) / len(found), len(found) - 1)], upper)
    return Figure(value, n, repeats=len(found), **interval)


def run_compare(
    values_a: Sequence[Optional[float]],
    values_b: Sequence[Optional[float]],
    *,
    n_a: int,
    n_b: int,
    margin: float,
) -> tuple[Figure, Figure, Ratio]:
    """(A, B, B/A) of a figure of whole runs, one value per run a side: the t test over runs (pooled variance of
    the per-run values' logs), which needs MIN_RUNS runs on each side."""
    fa, fb = run_figure(values_a, n_a), run_figure(values_b, n_b)
    value = ratio(fa.value, fb.value)
    if value is None:
        return fa, fb, Ratio(None)
    runs = [[float(v) for v in values if v is not None] for values in (values_a, values_b)]
    if min(len(r) for r in runs) < MIN_RUNS:
        fewest = min(len(r) for r in runs)
        return (
            fa,
            fb,
            Ratio(value, too_few=f"a figure of whole runs, {fewest} run on a side: {MIN_RUNS} needed", margin=margin),
        )
    if min(min(r) for r in runs) <= 0 or value <= 0:
        return fa, fb, Ratio(value, too_few="a value of 0", margin=margin)
    logs = [np.log(r) for r in runs]
    df = len(runs[0]) + len(runs[1]) - 2
    pooled = sum(float(((x - x.mean()) ** 2).sum()) for x in logs) / df
    tested = _tested(math.log(value), [(pooled * (1 / len(runs[0]) + 1 / len(runs[1])), df)], margin, 0)
    return fa, fb, tested
