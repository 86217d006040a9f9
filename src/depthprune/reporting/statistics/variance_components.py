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
    ratios = split_plot(simulate(fitted_means(fit), fit, n_seeds, draws, rng)).sd_ratio
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
    """The SD-ratio test on one split plot: the fit, R, its interval ends and verdict, and the
    rule's noise rates (NaN when not computed)."""

    fit: SplitPlot
    ratio: float
    ends: tuple[float, ...]
    verdict: str
    null_pass: float
    null_fail: float


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
) -> Comparability:
    """The split plot of y (S, A, C), R with its parametric-bootstrap interval, the equivalence
    verdict and (``studies`` > 0) the rule's noise rates. Seeded: the same data give the same result."""
    fit = split_plot(y)
    n_seeds = y.shape[0]
    ends = ratio_intervals(fit, n_seeds, draws, np.random.default_rng([seed, *y.shape, draws]))
    null_pass, null_fail = (
        noise_rates(fit, n_seeds, band, studies, noise_draws, seed) if studies else (float("nan"), float("nan"))
    )
    return Comparability(fit, float(fit.sd_ratio), ends, equivalence_verdict(ends, band), null_pass, null_fail)
