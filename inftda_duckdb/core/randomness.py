"""Counter-addressed randomness: AES-256 used as a keyed pseudorandom function (PRF).

Every random 64-bit word has an address, ``word = PRF_key(id, counter, w)``, so the noise of a
cell depends only on the key and the cell's id, never on how DuckDB batches or orders the rows
(the release is reproducible under a seed, and distinct ids get independent words).

Block layout (one AES block = 16 bytes = two little-endian uint64 halves)::

    bytes 0..7    id                        64 bits
    bytes 8..15   counter << 16 | pair      counter: 47 bits (the top bit 1 is reserved for
                                            key derivation), pair: 16 bits

Word ``w`` of ``(id, counter)`` is little-endian half ``w % 2`` of AES-256-ECB(key, block
``(id, counter, pair = w // 2)``). So one call addresses up to 2**17 words per (id, counter).
``derive(p)`` re-keys with ``AES(key, (p, 2**63 | 0)) || AES(key, (p, 2**63 | 1))``: derivation
blocks never collide with word blocks. AES is a pseudorandom permutation; over fewer than 2**60
blocks per key it is indistinguishable from a random function (advantage <= q**2 / 2**129).

Wide addresses. An address that does not fit 64 bits (a cell of a tree whose domain product
passes 2**64) is a row of L >= 1 uint64 *limbs*; its words come from AES-CBC-MAC under the wide
key ``W = AES(key, (0, 2**63 | 2)) || AES(key, (0, 2**63 | 3))`` (a third derivation block pair,
so W is independent of the word blocks and of every ``derive``) over the blocks

    (L, 0), (limb 0, limb 1), (limb 2, limb 3), ..., (pair, 0)

(limbs padded with a zero to an even count): word ``w`` is half ``w % 2`` of the MAC with
``pair = w // 2``. The length block first makes the encoding prefix-free, and CBC-MAC is a
pseudorandom function on prefix-free inputs (Bellare, Kilian, Rogaway; advantage
<= q**2 (L/2 + 2)**2 / 2**128): distinct addresses are distinct inputs, never truncated or
hashed together, and the cost is L/2 + 2 AES blocks per word (vectorised over the rows).

Secure sources take a fresh 32-byte key from ``os.urandom`` and are re-keyed in a forked child,
so parent and child never share noise. Seeded sources exist for tests and reproducible demos
only: they come from :meth:`RandomSource.from_seed` alone and carry ``private = False``.
numpy's PCG64 / Mersenne Twister never drive noise.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from typing import Any, NoReturn

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from . import memory
from .errors import bad_argument

COUNTER_BITS = 47  #: counters accepted by :meth:`RandomSource.words` are < 2**47
MAX_WIDTH = 1 << 17  #: words per (id, counter)
_DERIVE = 1 << 63  # high half of a key-derivation block (never produced by a word block)
_WIDE = _DERIVE | 2  # high halves _WIDE and _WIDE + 1 derive the CBC-MAC key of wide addresses

_LIVE: weakref.WeakSet[RandomSource] = weakref.WeakSet()  # private sources, re-keyed after fork


_CIPHERS = threading.local()  # per thread: ECB encryptors by key (ECB keeps no state between
# whole blocks, so one encryptor serves every call; building one costs ~50 us)


def _encryptor(key: bytes) -> Any:
    cache = getattr(_CIPHERS, "by_key", None)
    if cache is None:
        cache = _CIPHERS.by_key = {}
    enc = cache.get(key)
    if enc is None:
        if len(cache) >= 64:
            cache.clear()
        enc = cache[key] = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc


def _aes_ecb(key: bytes, blocks: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Encrypt a C-contiguous little-endian uint64 array of whole blocks; same shape out (into
    ``out``, C-contiguous with room for one spare block, if given)."""
    encryptor = _encryptor(key)
    if out is None:
        out = memory.empty(blocks.size + 2, "<u8")  # update_into wants one spare block
    encryptor.update_into(blocks.data.cast("B"), out.reshape(-1).data.cast("B"))
    return out.reshape(-1)[: blocks.size].reshape(blocks.shape)


def _as_ids(ids: object) -> np.ndarray:
    """Validate ids (values in [0, 2**64)): a 1-D integer array (64-bit addresses), or a 2-D
    one (one row of uint64 limbs per wide address); viewed as uint64."""
    arr = np.asarray(ids)
    if arr.ndim not in (1, 2) or arr.dtype.kind not in "iu" or (arr.ndim == 2 and not
                                                                arr.shape[1]):
        raise bad_argument(
            "ids", f"array of dtype {arr.dtype}, shape {arr.shape}",
            "must be a 1-D integer array (or 2-D: one row of limbs per wide address)",
            "pass e.g. numpy.arange(n, dtype=numpy.uint64)",
        )
    if arr.dtype.kind == "i":
        if arr.size and int(arr.min()) < 0:
            raise bad_argument("ids", int(arr.min()), "must be non-negative",
                               "use ids in [0, 2**64)")
        arr = arr.astype(np.int64, copy=False).view(np.uint64)
    return np.ascontiguousarray(arr, dtype=np.uint64)


class RandomSource:
    """A keyed PRF source. Obtain one with :meth:`secure` or :meth:`from_seed` only."""

    __slots__ = ("__weakref__", "_key", "_private", "_wide_key")
    _key: bytes
    _private: bool
    _wide_key: bytes | None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("use RandomSource.secure() (private) or RandomSource.from_seed(seed)"
                        " (tests and demos, not private)")

    @classmethod
    def _from_key(cls, key: bytes, private: bool) -> RandomSource:
        if len(key) != 32:
            raise ValueError("an AES-256 key has 32 bytes")
        self = object.__new__(cls)
        self._key = bytes(key)
        self._private = private
        self._wide_key = None
        if private:
            _LIVE.add(self)
        return self

    @classmethod
    def secure(cls) -> RandomSource:
        """A cryptographically secure source: fresh key from OS entropy, re-keyed after fork."""
        return cls._from_key(os.urandom(32), private=True)

    @classmethod
    def from_seed(cls, seed: int) -> RandomSource:
        """A deterministic source for tests and demos. Its output is NOT private."""
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or int(seed) < 0:
            raise bad_argument("seed", seed, "must be a non-negative integer",
                               "pass e.g. seed=42 (a seeded release is not private)")
        digest = hashlib.sha256(b"inftda-duckdb seeded source v1:%d" % int(seed)).digest()
        return cls._from_key(digest, private=False)

    @property
    def private(self) -> bool:
        """False for a seeded source: its output must never be published as private."""
        return self._private

    def derive(self, *path: int) -> RandomSource:
        """An independent sub-source (e.g. per level); derive(a, b) is derive(a).derive(b)."""
        key = self._key
        for p in path:
            if isinstance(p, bool) or not isinstance(p, int | np.integer) or not 0 <= p < 1 << 64:
                raise bad_argument("path element", p, "must be an integer in [0, 2**64)",
                                   "derive sub-sources with small non-negative integers")
            blocks = np.array([[int(p), _DERIVE], [int(p), _DERIVE | 1]], dtype="<u8")
            key = _aes_ecb(key, blocks).tobytes()
        return RandomSource._from_key(key, self._private)

    def export_key(self) -> bytes:
        """The 32-byte key, for a worker that must draw the same noise (another process or
        machine: ship it over an encrypted channel only). Rebuild the source there with
        :meth:`from_exported_key`; never log or store it."""
        return self._key

    @classmethod
    def from_exported_key(cls, key: bytes, private: bool) -> RandomSource:
        """The source whose key :meth:`export_key` returned (in a worker). A private source
        rebuilt in a process is re-keyed if that process forks later, like any other."""
        if not isinstance(key, bytes) or len(key) != 32 or not isinstance(private, bool):
            raise bad_argument("key", "(not shown)", "must be the 32 bytes export_key returned",
                               "pass source.export_key() and source.private unchanged")
        return cls._from_key(key, private)

    def words(self, ids: np.ndarray, counter: int, width: int) -> np.ndarray:
        """uint64 (len(ids), width): word ``w`` of row ``i`` is ``PRF(ids[i], counter, w)``;
        for 2-D ``ids`` (wide addresses, one row of limbs each) the CBC-MAC words, counter 0."""
        if isinstance(counter, bool) or not isinstance(counter, int | np.integer) or not (
            0 <= counter < 1 << COUNTER_BITS
        ):
            raise bad_argument("counter", counter, f"must be an integer in [0, 2**{COUNTER_BITS})",
                               "use small non-negative counters")
        if isinstance(width, bool) or not isinstance(width, int | np.integer) or not (
            1 <= width <= MAX_WIDTH
        ):
            raise bad_argument("width", width, f"must be an integer in [1, {MAX_WIDTH}]",
                               "ask for fewer words per call")
        u_ids = _as_ids(ids)
        if u_ids.ndim == 2 and counter:
            raise bad_argument("counter", counter, "must be 0 for wide addresses",
                               "address wide words by their limbs alone")
        out = self._pairs(u_ids, int(counter), 0, (int(width) + 1) // 2)
        return out[:, :width] if width % 2 else out

    def _pairs(self, ids: np.ndarray, counter: int | np.ndarray, pair0: int,
               npairs: int) -> np.ndarray:
        """Words ``2*pair0 .. 2*(pair0+npairs)-1`` for uint64 ``ids``: uint64 (n, 2*npairs).
        ``counter``: one for all ids, or a uint64 array with one per id (1-D ids only)."""
        if ids.ndim == 2:
            return self._wide_pairs(ids, pair0, npairs)
        blocks = memory.empty((ids.size, npairs, 2), "<u8")
        blocks[:, :, 0] = ids[:, None]
        high = np.asarray(counter, dtype=np.uint64).reshape(-1, 1) << np.uint64(16)
        blocks[:, :, 1] = high + np.uint64(pair0) + np.arange(npairs, dtype=np.uint64)
        out = _aes_ecb(self._key, blocks).reshape(ids.size, 2 * npairs)
        return out if out.dtype.isnative else out.astype(np.uint64)

    def _encrypt(self, blocks: np.ndarray, out: np.ndarray) -> np.ndarray:
        """AES of prepared word blocks (n, 2) (``(id, counter << 16 | pair)``) into ``out``."""
        words = _aes_ecb(self._key, blocks, out)
        return words if words.dtype.isnative else words.astype(np.uint64)

    def _wide_pairs(self, limbs: np.ndarray, pair0: int, npairs: int) -> np.ndarray:
        """CBC-MAC words of wide addresses (module docstring), uint64 (n, 2*npairs)."""
        if self._wide_key is None:
            blocks = np.array([[0, _WIDE], [0, _WIDE + 1]], dtype="<u8")
            self._wide_key = _aes_ecb(self._key, blocks).tobytes()
        key, (n, width) = self._wide_key, limbs.shape
        state = _aes_ecb(key, np.array([[width, 0]], dtype="<u8"))  # the length block
        state = np.broadcast_to(state, (n, 2))
        for j in range(0, width, 2):
            block = np.zeros((n, 2), "<u8")
            block[:, : min(2, width - j)] = limbs[:, j : j + 2]
            state = _aes_ecb(key, block ^ state)
        last = np.zeros((n, npairs, 2), "<u8")
        last[:, :, 0] = np.uint64(pair0) + np.arange(npairs, dtype=np.uint64)
        out = _aes_ecb(key, last ^ state[:, None, :]).reshape(n, 2 * npairs)
        return out if out.dtype.isnative else out.astype(np.uint64)

    def _word(self, id_: int | np.ndarray, counter: int, index: int) -> int:
        """One word, for the rare exact-refinement paths of the samplers (``id_``: an int, or
        one row of limbs)."""
        ids = np.asarray(id_, dtype=np.uint64)
        ids = ids.reshape(1, -1) if ids.ndim else ids.reshape(1)
        return int(self._pairs(ids, counter, index // 2, 1)[0, index % 2])

    def __repr__(self) -> str:
        return f"RandomSource(private={self._private})"

    def __reduce__(self) -> NoReturn:
        # Copying or pickling a key would silently duplicate noise.
        raise TypeError("RandomSource cannot be copied or pickled; derive() a sub-source instead")


def _rekey_after_fork() -> None:
    for source in list(_LIVE):
        source._key = os.urandom(32)
        source._wide_key = None


os.register_at_fork(after_in_child=_rekey_after_fork)

__all__ = ["COUNTER_BITS", "MAX_WIDTH", "RandomSource"]
