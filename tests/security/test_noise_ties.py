"""A crash after the charge: the exact refinement of a noise word equal to a threshold (about
1e-14 a sample) for a wide noise address (past 2**64, one row of uint64 limbs).

The rare path is forced: the distribution's tables are replaced by ones whose every bucket is
searched and one of whose thresholds equals the sample's first word, so the refinement runs at
once instead of once in 1e14 samples.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from inftda_duckdb.core import noise
from inftda_duckdb.core.noise import DiscreteGaussian
from inftda_duckdb.core.randomness import RandomSource

MASK = (1 << 63) - 1


def _tied(dist: DiscreteGaussian, u: int) -> None:
    """Make ``u`` a threshold of ``dist`` and send every word to the search (in place)."""
    tab = dist._tab
    cdf = tab.cdf.copy()
    a = int(np.searchsorted(cdf, np.uint64(u)))
    cdf[a] = u  # cdf[a - 1] < u <= cdf[a]: still non-decreasing
    signed = np.full_like(tab.signed, noise._SEARCH)
    small = np.full_like(tab.small, np.iinfo(tab.small.dtype).min)
    object.__setattr__(dist, "_tab", dataclasses.replace(tab, cdf=cdf, signed=signed,
                                                          small=small))


@pytest.mark.parametrize("limbs", [[[7, 1]], [[3, 0, 9]], [[5]]], ids=["2 limbs", "3 limbs",
                                                                      "1 limb"])
def test_a_tie_on_a_wide_address_is_refined(limbs: list[list[int]],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise.kernel, "wanted", lambda n: False)  # the numpy path decodes
    source = RandomSource.from_seed(11)
    ids = np.array(limbs, dtype=np.uint64)
    w0 = int(source._pairs(ids, 0, 0, 1)[0, 0])
    dist = DiscreteGaussian(Fraction(9, 2))
    _tied(dist, w0 & MASK)
    got = dist.sample(source, ids)  # raised TypeError (int() of a row of limbs) before
    # the refinement's own answer, from further words of the same address
    a = int(np.searchsorted(dist._tab.cdf, np.uint64(w0 & MASK)))
    want = dist._refine(source, ids[0], w0 & MASK, a)
    assert got.tolist() == [-want if w0 >> 63 else want]
    assert dist.sample(source, ids).tolist() == got.tolist()  # the address decides it


def test_a_tie_on_a_narrow_address_still_refines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: a 64-bit address took the same path before and after."""
    monkeypatch.setattr(noise.kernel, "wanted", lambda n: False)
    source = RandomSource.from_seed(11)
    ids = np.array([12345], dtype=np.uint64)
    w0 = int(source._pairs(ids, 0, 0, 1)[0, 0])
    dist = DiscreteGaussian(Fraction(9, 2))
    _tied(dist, w0 & MASK)
    a = int(np.searchsorted(dist._tab.cdf, np.uint64(w0 & MASK)))
    want = dist._refine(source, 12345, w0 & MASK, a)
    assert dist.sample(source, ids).tolist() == [-want if w0 >> 63 else want]
