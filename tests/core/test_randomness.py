"""The counter-addressed AES-256 PRF: known answers, addressing, sources, fork safety."""

from __future__ import annotations

import copy
import os
import pickle
import warnings

import numpy as np
import pytest

from inftda_duckdb.core.errors import InputError
from inftda_duckdb.core.randomness import RandomSource, _aes_ecb


def _le(hex_text: str) -> int:
    return int.from_bytes(bytes.fromhex(hex_text), "little")


def test_fips197_aes256_known_answer_through_the_block_layout():
    # FIPS-197 Appendix C.3: the plaintext bytes are the block (id, counter << 16 | pair).
    key = bytes(range(32))
    block = np.array([[_le("0011223344556677"), _le("8899aabbccddeeff")]], dtype="<u8")
    assert _aes_ecb(key, block).tobytes().hex() == "8ea2b7ca516745bfeafc49904b496089"


def test_sp800_38a_ecb_aes256_known_answer_through_words():
    # NIST SP 800-38A F.1.5 (ECB-AES256.Encrypt, block 1), addressed as (id, counter, word index).
    key = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
    source = RandomSource._from_key(key, private=False)
    ident, high = _le("6bc1bee22e409f96"), _le("e93d7e117393172a")
    counter, pair = high >> 16, high & 0xFFFF
    got = source.words(np.array([ident], dtype=np.uint64), counter, 2 * pair + 2)[0, 2 * pair:]
    assert got.astype("<u8").tobytes().hex() == "f3eed1bdb5d2a03c064b5a7e3db181f8"


def test_words_are_addressed_not_batched():
    source = RandomSource.from_seed(7)
    ids = np.array([5, 0, 2**64 - 1, 123456789], dtype=np.uint64)
    full = source.words(ids, 3, 5)
    assert full.shape == (4, 5) and full.dtype == np.uint64
    assert np.array_equal(source.words(ids, 3, 2), full[:, :2])  # width does not change words
    assert np.array_equal(source.words(ids[::-1], 3, 5), full[::-1])  # order does not either
    assert np.array_equal(source.words(ids[1:2], 3, 5), full[1:2])
    assert not np.array_equal(source.words(ids, 4, 5), full)  # another counter: other words
    assert np.array_equal(RandomSource.from_seed(7).words(ids, 3, 5), full)  # reproducible
    assert not np.array_equal(RandomSource.from_seed(8).words(ids, 3, 5), full)
    assert np.array_equal(source.words(ids.astype(np.int64)[:2], 3, 5), full[:2])


def test_words_bits_are_balanced():
    # 64 * 2e5 bits; each bit position's frequency within 5 standard errors (false-failure
    # rate ~ 64 * 6e-7 = 4e-5). Negative control: a constant stream fails the same check.
    source = RandomSource.secure()
    words = source.words(np.arange(100_000, dtype=np.uint64), 0, 2).ravel()
    n = words.size

    def balanced(w: np.ndarray) -> bool:
        bits = (w[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
        return bool(np.all(np.abs(bits.mean(axis=0) - 0.5) < 5 * 0.5 / np.sqrt(n)))

    assert balanced(words)
    assert not balanced(np.full(n, 0xDEADBEEF, dtype=np.uint64))


def test_sources_privacy_flags_and_derivation():
    secure, seeded = RandomSource.secure(), RandomSource.from_seed(1)
    assert secure.private and not seeded.private
    assert secure.derive(3).private and not seeded.derive(3).private
    ids = np.arange(1000, dtype=np.uint64)
    w = seeded.words(ids, 0, 2)
    assert np.array_equal(seeded.derive(1, 2).words(ids, 0, 2),
                          seeded.derive(1).derive(2).words(ids, 0, 2))
    for other in (seeded.derive(1), seeded.derive(2), seeded.derive(1, 2), secure):
        assert not np.any(other.words(ids, 0, 2) == w)  # 2000 equal 64-bit words: 2**-53
    assert not np.array_equal(RandomSource.secure().words(ids, 0, 2), secure.words(ids, 0, 2))
    assert "private=True" in repr(secure) and secure._key.hex() not in repr(secure)


def test_no_seeded_source_by_accident():
    with pytest.raises(TypeError):
        RandomSource()
    with pytest.raises(TypeError):
        RandomSource(b"\0" * 32)
    for bad in (-1, 1.5, "3", None, True):
        with pytest.raises(InputError, match="seed"):
            RandomSource.from_seed(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pickle.dumps(RandomSource.secure())
    with pytest.raises(TypeError):
        copy.copy(RandomSource.secure())


def test_invalid_arguments_are_refused():
    source = RandomSource.from_seed(0)
    ids = np.arange(3)
    for counter in (-1, 2**47, 1.0):
        with pytest.raises(InputError, match="counter"):
            source.words(ids, counter, 1)  # type: ignore[arg-type]
    for width in (0, 2**17 + 1):
        with pytest.raises(InputError, match="width"):
            source.words(ids, 0, width)
    with pytest.raises(InputError, match="ids"):
        source.words(np.array([1, -1]), 0, 1)
    with pytest.raises(InputError, match="ids"):
        source.words(np.array([1.0]), 0, 1)
    with pytest.raises(InputError, match="path"):
        source.derive(-1)


def _child_words(source: RandomSource) -> bytes:
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "fork() in a threaded process"
        pid = os.fork()
    if pid == 0:  # child
        try:
            os.write(write, source.words(np.arange(4, dtype=np.uint64), 0, 2).tobytes())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 4096):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return data


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_secure_sources_are_rekeyed_in_a_forked_child():
    secure, seeded = RandomSource.secure(), RandomSource.from_seed(5)
    derived = secure.derive(1)
    ids = np.arange(4, dtype=np.uint64)
    assert _child_words(secure) != secure.words(ids, 0, 2).tobytes()
    assert _child_words(derived) != derived.words(ids, 0, 2).tobytes()
    # negative control: a seeded source is deterministic on purpose, also in a child
    assert _child_words(seeded) == seeded.words(ids, 0, 2).tobytes()
