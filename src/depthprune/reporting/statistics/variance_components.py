"""§5.2's "search-induced and configuration-induced variances are comparable" as variance components
(docs/method.md §10), with the seeds as replicates.

Per (model, M) the responses y[s, a, c] (S seeds × A algorithms × C calibrations) form a split plot:
a seed's calibration draw is shared by its A searches, so the whole plot is (seed, calibration) and
the algorithm is the subplot factor. Sums of squares of the balanced layout; calibration is tested
against the whole-plot error (seed × calibration), algorithm and algorithm × calibration against the
subplot error. The calibrations and algorithms are the paper's fixed levels, so a factor's variance
is the variance (ddof 1) of its level means, estimated by the method of moments from the expected
mean squares and floored at zero (REML would need statsmodels; for a balanced layout both estimate the
same quantity). "Comparable" is an equivalence test of R = σ_cal / σ_alg against [1/band, band]:
two one-sided tests at 5 % (the 90 % interval inside the band) for ``holds``, the 95 % interval
wholly outside for ``does not hold``. The interval is a parametric bootstrap of the fitted split plot
(with S = 4 a bootstrap over seeds has 35 distinct resamples). The rule's noise rates come from
split plots simulated with no calibration effect (a pass) and with equal SDs (a failure).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

HOLDS, FAILS, UNSURE = "holds", "does not hold", "inconclusive"
BOOTSTRAP_DRAWS = 2_000  # parametric bootstrap draws of the SD ratio's interval
NOISE_STUDIES = 1_000  # simulated split plots per noise rate
NOISE_DRAWS = 500  # bootstrap draws of each simulated split plot's own interval
SEED = 20_261_206


@dataclass(frozen=True)
class SplitPlot:
    """A split plot's mean squares (by term), their degrees of freedom, the effects of the fitted
    fixed part and the moment estimates of the two factors' variances."""

    ms: dict[str, np.ndarray]
    df: dict[str, int]
    grand: np.ndarray
    calibration_effects: np.ndarray  # (..., C)
    algorithm_effects: np.ndarray  # (..., A)
    interaction_effects: np.ndarray  # (..., A, C)
    var_calibration: np.ndarray
    var_algorithm: np.ndarray

    def p_value(self, term: str) -> float:
        """The F-test p of a term against its error stratum."""
        error = "seed_x_calibration" if term == "calibration" else "error"
        with np.errstate(divide="ignore", invalid="ignore"):
            f = self.ms[term] / self.ms[error]
        return float(stats.f.sf(f, self.df[term], self.df[error]))

    @property
    def sd_ratio(self) -> np.ndarray:
        """R = σ_cal / σ_alg (inf with no algorithm variance, NaN with neither)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sqrt(self.var_calibration / self.var_algorithm)


def split_plot(y: np.ndarray) -> SplitPlot:
    """Decompose y (..., S, A, C): any leading axes are independent split plots (bootstrap draws)."""
    y = np.asarray(y, dtype=float)
    s, a, c = y.shape[-3:]
    if s < 2 or a < 2 or c < 2:
        raise ValueError(f"a split plot needs at least 2 seeds, algorithms and calibrations, got {s}, {a}, {c}")
    grand = y.mean(axis=(-3, -2, -1))
    g = grand[..., None]
    m_s, m_a, m_c = y.mean(axis=(-2, -1)), y.mean(axis=(-3, -1)), y.mean(axis=(-3, -2))
    m_sc, m_ac = y.mean(axis=-2), y.mean(axis=-3)
    cal, alg = m_c - g, m_a - g
    seed_x_cal = m_sc - m_s[..., :, None] - m_c[..., None, :] + grand[..., None, None]
    inter = m_ac - m_a[..., :, None] - m_c[..., None, :] + grand[..., None, None]
    ss = {
        "calibration": s * a * (cal**2).sum(-1),
        "seed": a * c * ((m_s - g) ** 2).sum(-1),
        "seed_x_calibration": a * (seed_x_cal**2).sum((-2, -1)),
        "algorithm": s * c * (alg**2).sum(-1),
        "algorithm_x_calibration": s * (inter**2).sum((-2, -1)),
    }
    total = ((y - grand[..., None, None, None]) ** 2).sum((-3, -2, -1))
    ss["error"] = total - sum(ss.values())
    df = {
        "calibration": c - 1,
        "seed": s - 1,
        "seed_x_calibration": (s - 1) * (c - 1),
        "algorithm": a - 1,
        "algorithm_x_calibration": (a - 1) * (c - 1),
        "error": c * (s - 1) * (a - 1),
    }
    ms = {term: ss[term] / df[term] for term in ss}
    return SplitPlot(
        ms=ms,
        df=df,
        grand=grand,
        calibration_effects=cal,
        algorithm_effects=alg,
        interaction_effects=inter,
        var_calibration=np.maximum(0.0, (ms["calibration"] - ms["seed_x_calibration"]) / (a * s)),
        var_algorithm=np.maximum(0.0, (ms["algorithm"] - ms["error"]) / (c * s)),
    )


def _scaled(effects: np.ndarray, variance: float, ddof: int) -> np.ndarray:
    """Effects rescaled so that their variance (sum of squares / ddof) is ``variance``."""
    raw = float((effects**2).sum() / ddof)
    return effects * np.sqrt(variance / raw) if raw > 0 else np.zeros_like(effects)


def fitted_means(fit: SplitPlot, var_calibration: float | None = None) -> np.ndarray:
    """The (A, C) cell means of the fitted fixed part: each factor's effects scaled to its moment
    estimate (the interaction's to (MS_AxC − MS_error) / S); ``var_calibration`` sets the calibration
    variance instead (0: no calibration effect)."""
    a, c = fit.interaction_effects.shape
    s = fit.df["seed"] + 1
    var_cal = float(fit.var_calibration) if var_calibration is None else var_calibration
    var_inter = max(0.0, float(fit.ms["algorithm_x_calibration"] - fit.ms["error"]) / s)
    cal = _scaled(fit.calibration_effects, var_cal, c - 1)
    alg = _scaled(fit.algorithm_effects, float(fit.var_algorithm), a - 1)
    inter = _scaled(fit.interaction_effects, var_inter, (a - 1) * (c - 1))
    return float(fit.grand) + alg[:, None] + cal[None, :] + inter


def simulate(means: np.ndarray, fit: SplitPlot, n_seeds: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` split plots (draws, S, A, C) around ``means`` with the fit's whole-plot variance
    (MS_seed×cal − MS_error) / A (floored at zero) and subplot variance MS_error, normal errors."""
    a, c = means.shape
    whole = max(0.0, float(fit.ms["seed_x_calibration"] - fit.ms["error"]) / a)
    sub = max(0.0, float(fit.ms["error"]))
    plots = rng.normal(0.0, np.sqrt(whole), (draws, n_seeds, 1, c))
    return means[None, None] + plots + rng.normal(0.0, np.sqrt(sub), (draws, n_seeds, a, c))


def ratio_intervals(fit: SplitPlot, n_seeds: int, draws: int, rng: np.random.Generator) -> tuple[float, ...]:
    """(90 % low, 90 % high, 95 % low, 95 % high) of R, percentile over the parametric bootstrap."""
    return _percentile_ends(split_plot(simulate(fitted_means(fit), fit, n_seeds, draws, rng)).sd_ratio)


def crossed_ratio_intervals(replicates: np.ndarray, draws: int, rng: np.random.Generator) -> tuple[float, ...]:
    """(90 % low, 90 % high, 95 % low, 95 % high) of R from the non-parametric crossed bootstrap:
    ``replicates`` (B, S, A, C) holds the paired document replicates of every seed's split-plot cells
    (replicate b of every seed reads the same document resample: the documents are crossed with the
    seeds), and each draw takes S seeds with replacement and one replicate b shared by them, so seeds
    and documents are both resampled as they were sampled."""
    n_replicates, n_seeds = replicates.shape[:2]
    seeds = rng.integers(n_seeds, size=(draws, n_seeds))
    documents = rng.integers(n_replicates, size=draws)
    return _percentile_ends(split_plot(replicates[documents[:, None], seeds]).sd_ratio)


def _percentile_ends(ratios: np.ndarray) -> tuple[float, ...]:
    ratios = ratios[~np.isnan(ratios)]  # NaN: neither factor varies in that draw; inf stays (above any band)
    if ratios.size == 0:
        return (float("nan"),) * 4
    # Order statistics, not interpolation: an infinite ratio (no algorithm variance in a draw) stays inf.
    return tuple(float(q) for q in np.quantile(ratios, [0.05, 0.95, 0.025, 0.975], method="inverted_cdf"))


def equivalence_verdict(ends: tuple[float, ...], band: float) -> str:
    """holds when the 90 % interval lies inside [1/band, band] (TOST at 5 %), does not hold when the
    95 % interval lies wholly outside it, else inconclusive."""
    lo90, hi90, lo95, hi95 = ends
    if np.isnan(ends).any():
        return UNSURE
    if 1 / band <= lo90 and hi90 <= band:
        return HOLDS
    if hi95 < 1 / band or lo95 > band:
        return FAILS
    return UNSURE


@dataclass(frozen=True)
class Comparability:
    """The SD-ratio test on one split plot: the fit, R, its parametric interval ends and their
    verdict, the crossed bootstrap's ends and verdict (NaN and None without document replicates),
    the verdict (``both_agree``), and the parametric rule's noise rates (NaN when not computed)."""

    fit: SplitPlot
    ratio: float
    ends: tuple[float, ...]
    parametric_verdict: str
    crossed_ends: tuple[float, ...]
    crossed_verdict: str | None
    null_pass: float
    null_fail: float

    @property
    def verdict(self) -> str:
        return both_agree(self.parametric_verdict, self.crossed_verdict)


def both_agree(parametric: str, crossed: str | None) -> str:
    """The SD ratio's verdict (docs/method.md §10, amended by issue 66 item 7): a holds or a does not
    hold needs the parametric and the crossed interval to agree; a verdict that one defensible
    interval reaches and the other does not is inconclusive. Without replicates, the parametric one."""
    if crossed is None or crossed == parametric:
        return parametric
    return UNSURE


def leave_one_out(y: np.ndarray) -> tuple[int, float, float] | None:
    """(index of the algorithm whose removal moves σ_alg the most (in log ratio), σ_alg without it,
    R without it) of a split plot y (S, A, C); None with fewer than three algorithms. Says how much of
    the algorithm variance one search carries (issue 66 item 7: one failed search's share)."""
    a = y.shape[1]
    if a < 3:
        return None
    full = float(np.sqrt(split_plot(y).var_algorithm))
    best = None
    for k in range(a):
        fit = split_plot(np.delete(y, k, axis=1))
        sd = float(np.sqrt(fit.var_algorithm))
        moved = 0.0 if sd == full else np.inf if min(sd, full) <= 0 else abs(np.log(sd / full))
        if best is None or moved > best[0]:
            best = (moved, k, sd, float(fit.sd_ratio))
    return best[1], best[2], best[3]


def noise_rates(fit: SplitPlot, n_seeds: int, band: float, studies: int, draws: int, seed: int) -> tuple[float, float]:
    """(share of simulated split plots with no calibration effect that reach ``holds``, share with
    equal SDs (R = 1) that reach ``does not hold``), each judged with its own parametric bootstrap."""
    rng = np.random.default_rng([seed, n_seeds, studies, draws])
    rates = []
    for var_calibration, verdict in ((0.0, HOLDS), (float(fit.var_algorithm), FAILS)):
        if float(fit.var_algorithm) <= 0:
            rates.append(float("nan"))  # equal SDs of zero: no effect of either, the ratio undefined
            continue
        means = fitted_means(fit, var_calibration)
        hits = 0
        for data in simulate(means, fit, n_seeds, studies, rng):
            one = split_plot(data)
            hits += equivalence_verdict(ratio_intervals(one, n_seeds, draws, rng), band) == verdict
        rates.append(hits / studies)
    return rates[0], rates[1]


def comparability(
    y: np.ndarray,
    band: float,
    draws: int = BOOTSTRAP_DRAWS,
    studies: int = NOISE_STUDIES,
    noise_draws: int = NOISE_DRAWS,
    seed: int = SEED,
    replicates: np.ndarray | None = None,
) -> Comparability:
    """The split plot of y (S, A, C), R with its parametric-bootstrap interval, the crossed
    bootstrap's interval when ``replicates`` (B, S, A, C; ``crossed_ratio_intervals``) are given,
    the equivalence verdicts and (``studies`` > 0) the parametric rule's noise rates. Seeded: the
    same data give the same result."""
    fit = split_plot(y)
    n_seeds = y.shape[0]
    ends = ratio_intervals(fit, n_seeds, draws, np.random.default_rng([seed, *y.shape, draws]))
    crossed_ends, crossed_verdict = (float("nan"),) * 4, None
    if replicates is not None:
        rng = np.random.default_rng([seed, *replicates.shape, draws, 1])
        crossed_ends = crossed_ratio_intervals(replicates, draws, rng)
        crossed_verdict = equivalence_verdict(crossed_ends, band)
    null_pass, null_fail = (
        noise_rates(fit, n_seeds, band, studies, noise_draws, seed) if studies else (float("nan"), float("nan"))
    )
    return Comparability(
        fit,
        float(fit.sd_ratio),
        ends,
        equivalence_verdict(ends, band),
        crossed_ends,
        crossed_verdict,
        null_pass,
        null_fail,
    )
