"""The arithmetic of the least-squares pass: its fixed point, its range and its certified error.

Every value of the pass that decides an integer is an int64 in units of ``2**-bits``; sums of
them are exact integer sums (any order, any split of the tree: both engines get the same
integers), and the only inexact steps are elementwise: one float64 product and one ``rint`` per
cell and pass. This module fixes ``bits`` and bounds, from public numbers only (the plan's
variances, the domain sizes, which levels are nested), how far the computed estimates can be from
the exact least-squares ones, on the event that the noise stays within the caps below (it
leaves them with probability below ``2**-60``; the pass checks them and raises if not).

**The caps.** ``z = sqrt(2 ln(6 N 2**64))`` with ``N`` the public cells of the whole product of
domains (at least the cells of every level). Each of the ``<= 3 N`` quantities below is
sub-Gaussian with the stated variance proxy, so each exceeds ``z`` times its proxy's root with
probability at most ``2 exp(-z**2 / 2) = 2**-63 / (3 N)``:

- a level-k noise ``Z`` (``sigma_k**2``);
- ``T_v``, the sum of the upward estimates of the children of a level-k node (``sum_c V_c <=
  s_{k+1} sigma_{k+1}**2``);
- ``e_p - T_p`` of a level-(k-1) parent (``|e_p| <= z sigma_{k-1}`` and ``|T_p| <= z sqrt(s_k)
  sigma_k``; ``e_p``'s proxy is at most ``sigma_{k-1}**2``, see the docs' proof).

**The error** (real units, u = 2**-53; see docs/explanation/least-squares.md for the derivation).
Upward, a node's error is its children's summed error times ``beta_v = V_v / VS_v`` plus its own
rounding: ``A_k = rho_k A_{k+1} + (eps_alpha + 2.01 u) m_k + 2**-(bits+1)`` with ``rho_k >= beta_v
w_v`` (``<= min(s_{k+1}, sigma_k**2 / H_{k+1})``, ``H_k = 1 / sum_{l >= k} sigma_l**-2`` the
least a node's variance can be), ``m_k`` the cap of ``|Z - T|``, ``A_d = 0`` (the leaves' values
are exact). Downward: ``B_k = (1 + g_k) A_k + B_{k-1} + (eps_gamma + 2.01 u) n_k +
2**-(bits+1)`` with ``g_k >= gamma_c w_p`` and ``n_k`` the cap of ``|e_p - T_p|``. ``eta =
max_k B_k`` bounds ``|e_hat - e|`` at every cell whose rounding the integer pass uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..accounting import ETA
from ..errors import InputError

U = 2.0 ** -53  # the unit roundoff of float64
SAFETY = 1.05  # covers the second-order terms of the relative-error bounds
MAX_BITS = 40
"""At most this many fractional bits: finer than float64 products resolve anyway."""
MIN_BITS = 8
_LN2_UP = Fraction(6932, 10000)  # > ln 2


def _isqrt_up(x: Fraction | int) -> int:
    """An integer >= sqrt(x), exactly."""
    n = math.ceil(Fraction(x))
    r = math.isqrt(n)
    return r if r * r == n else r + 1


@dataclass(frozen=True)
class Arithmetic:
    """The fixed point of a release's least-squares pass and its caps, the same on every engine
    (exact integer arithmetic on the plan's fractions): ``bits`` fractional bits; per level
    ``k = 0..d`` (0: the root) the cap of ``|Z|`` (``cap_z``, 0 for a public root), of ``|T|``
    (``cap_t``, ``k < d``) and of ``|e_p - T_p|`` (``cap_d``, ``k >= 1``), as integers in real
    units; ``eta``: the certified error of the estimates the integer pass rounds."""

    bits: int
    cap_z: tuple[int, ...]
    cap_t: tuple[int, ...]
    cap_d: tuple[int, ...]
    eta: float

    @property
    def one(self) -> int:
        """1 in fixed point."""
        return 1 << self.bits

    @classmethod
    def of(cls, sigma2: Sequence[Fraction], sizes: Sequence[int], nested: Sequence[bool],
           root_sigma2: Fraction | None) -> Arithmetic:
        """The arithmetic for levels 1..d with variances ``sigma2``, domain sizes ``sizes``
        (a bound on any node's children), ``nested[k-1]`` for a nested level k, and the root's
        variance when it is noised (None: the root is public)."""
        d = len(sizes)
        sizes = [int(s) for s in sizes]
        s2 = [Fraction(root_sigma2 or 0), *(Fraction(x) for x in sigma2)]
        cells = sum(math.prod(sizes[:k]) for k in range(1, d + 1))
        z = _isqrt_up(2 * _LN2_UP * ((6 * cells).bit_length() + 64))
        sig = [_isqrt_up(x) for x in s2]  # >= sigma_k
        root = root_sigma2 is not None
        cap_z = tuple(z * s for s in sig)
        cap_t = tuple(z * _isqrt_up(sizes[k]) * sig[k + 1] for k in range(d))
        cap_d = (0, *(z * ((sig[k - 1] if k > 1 or root else 0)
                           + _isqrt_up(sizes[k - 1]) * sig[k]) for k in range(1, d + 1)))
        top = max(max(cap_z[k] + cap_t[k] for k in range(d)), max(cap_d)) + 2
        bits = min(MAX_BITS, 61 - top.bit_length())
        eta = _eta(s2, sizes, nested, root, bits, cap_z, cap_t, cap_d)
        return cls(bits, cap_z, cap_t, cap_d, eta)

    def check(self) -> None:
        """Refuse (before anything is charged) a plan whose arithmetic cannot be certified."""
        if self.bits < MIN_BITS or not self.eta <= ETA:
            raise InputError(
                "estimator 'least_squares' cannot certify its arithmetic for this release (its "
                f"fixed point would have {self.bits} fractional bits and an error up to "
                f"{self.eta:.3g}, above {ETA:g}): the noise scales of the levels differ too "
                "much, or a domain is too large; nothing was charged. Fix: use estimator "
                "'inftda', or more even level_weights"
            )


def _eta(s2: list[Fraction], sizes: list[int], nested: Sequence[bool], root: bool, bits: int,
         cap_z: tuple[int, ...], cap_t: tuple[int, ...], cap_d: tuple[int, ...]) -> float:
    """The module docstring's recursion (floats; only compared with :data:`ETA`)."""
    d = len(sizes)
    half = 2.0 ** -(bits + 1)
    var = [float(x) for x in s2]
    uniform = [not any(nested[k:]) for k in range(d + 1)]  # no nested level below k
    inv = [0.0] * (d + 2)  # sum_{l >= k} 1 / sigma_l**2
    for k in range(d, 0, -1):
        inv[k] = inv[k + 1] + 1 / var[k]
    tau = [U] * (d + 1)  # relative error of a level's computed variances
    tau_sum = [U] * (d + 1)  # ... of a node's children's summed variances
    for k in range(d - 1, -1, -1):
        if not uniform[k]:
            tau_sum[k] = tau[k + 1] + (sizes[k] + 1) * U
            tau[k] = tau_sum[k] + 4 * U
    a = [0.0] * (d + 1)
    for k in range(d - 1, -1 if root else 0, -1):
        rho = min(sizes[k], var[k] * inv[k + 1]) if var[k] else 0.0
        eps = U if uniform[k] else tau[k] + 3 * U
        a[k] = rho * a[k + 1] + SAFETY * (eps + 2.01 * U) * (cap_z[k] + cap_t[k] + 1) + half
    b = a[0] if root else 0.0
    worst = b
    for k in range(1, d + 1):
        g = 1.0 if uniform[k - 1] else min(sizes[k - 1], var[k] * inv[k])
        eps = U if uniform[k - 1] else tau[k] + tau_sum[k - 1] + 2 * U
        b = (1 + g) * a[k] + b + SAFETY * (eps + 2.01 * U) * (cap_d[k] + 1) + half
        worst = max(worst, b)
    return worst


__all__ = ["ETA", "MAX_BITS", "Arithmetic"]
