"""Statistical checks of random generators (MXNet's ``test_utils`` chi-square helpers).

A generator is any ``generator(n) -> n samples`` callable. Continuous distributions are
checked against buckets ``(low, high)`` with their probabilities (``gen_buckets_probs_with_ppf``
makes equal-probability buckets from a quantile function); discrete ones against the list of
values they can take.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def gen_buckets_probs_with_ppf(ppf: Callable[[float], float], nbuckets: int) -> tuple[list[Any], list[float]]:
    """``nbuckets`` buckets of equal probability from a quantile function ``ppf``."""
    if nbuckets <= 0:
        raise ValueError(f"nbuckets must be positive, got {nbuckets}")
    probs = [1.0 / nbuckets] * nbuckets
    buckets = [(ppf(i / nbuckets), ppf((i + 1) / nbuckets)) for i in range(nbuckets)]
    return buckets, probs


def mean_check(generator: Callable[[int], Any], mu: float, sigma: float, nsamples: int = 1000000) -> bool:
    """Whether the sample mean lies within ``mu +- 3 sigma / sqrt(n)``."""
    mean = np.asarray(generator(nsamples)).mean()
    bound = 3 * sigma / np.sqrt(nsamples)
    return bool(mu - bound < mean < mu + bound)


def var_check(generator: Callable[[int], Any], sigma: float, nsamples: int = 1000000) -> bool:
    """Whether the sample variance lies within ``sigma^2 +- 3 sqrt(2 sigma^4 / (n - 1))``."""
    var = np.asarray(generator(nsamples)).var(ddof=1)
    bound = 3 * np.sqrt(2 * sigma ** 4 / (nsamples - 1))
    return bool(sigma ** 2 - bound < var < sigma ** 2 + bound)


def chi_square_check(generator: Callable[[int], Any], buckets: list[Any], probs: Sequence[float],
                     nsamples: int = 1000000) -> tuple[float, np.ndarray, np.ndarray]:
    """Pearson's chi-square test of ``generator``'s samples against ``probs`` over ``buckets``.

    Returns ``(p value, observed counts, expected counts)``.
    """
    import scipy.stats

    if not isinstance(buckets, list) or len(buckets) != len(probs):
        raise ValueError(f"buckets must be a list as long as probs ({len(probs)}), got {buckets!r}")
    samples = np.asarray(generator(nsamples))
    if hasattr(samples, "asnumpy"):
        samples = samples.asnumpy()
    expected = (nsamples * np.asarray(probs, dtype=np.float32)).astype(np.int64)
    observed = np.zeros(len(buckets), dtype=np.int64)
    if isinstance(buckets[0], (list, tuple)):
        edges = np.asarray(buckets, dtype=np.float32).reshape(-1)
        if np.any(np.diff(edges) < 0):
            raise ValueError(f"continuous buckets must be ascending and disjoint, got {buckets!r}")
        ids = np.searchsorted(edges, samples.reshape(-1), side="right") // 2
        observed[:] = np.bincount(ids, minlength=len(buckets) + 1)[: len(buckets)]
    else:
        flat = samples.reshape(-1)
        for i, value in enumerate(buckets):
            observed[i] = int((flat == value).sum())
    _, p = scipy.stats.chisquare(f_obs=observed, f_exp=expected * observed.sum() / max(expected.sum(), 1))
    return float(p), observed, expected


def verify_generator(generator: Callable[[int], Any], buckets: list[Any], probs: Sequence[float],
                     nsamples: int = 1000000, nrepeat: int = 5, success_rate: float = 0.2,
                     alpha: float = 0.05) -> list[float]:
    """Repeat :func:`chi_square_check` ``nrepeat`` times; fail unless ``success_rate`` of them pass.

    Raises ``AssertionError`` with the p values and counts when too few repeats have ``p > alpha``.
    """
    results = [chi_square_check(generator, buckets, probs, nsamples) for _ in range(nrepeat)]
    pvalues = [r[0] for r in results]
    if sum(p > alpha for p in pvalues) < nrepeat * success_rate:
        raise AssertionError(
            f"generator test fails: chi-square p={pvalues}, observed={[r[1].tolist() for r in results]}, "
            f"expected={[r[2].tolist() for r in results]}; buckets={buckets}, probs={list(probs)}")
    return pvalues
