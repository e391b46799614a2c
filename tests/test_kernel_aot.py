"""The kernel built ahead of time (``inftda-duckdb build-kernel``; core/_kernel_aot.py and
core/_kernel_build.py).

Fast (neither numba nor a compiler needed): a missing, untrusted or corrupt build is not loaded
and a release falls back to the same outputs, silently; the key follows what the machine code
depends on; the kernel's arguments are checked against its export signatures; the command's
errors and ``--check``. Slow (numba and a C/C++ compiler; one ~15 s build shared by the tests):
the build releases the GIL, is reused, computes the numpy path's integers in a process that never
imports numba, and ``auto`` uses it from a process's first large block.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from test_kernel import random_leaves

import inftda_duckdb
from inftda_duckdb.core import _kernel_aot, _kernel_build, intopt, kernel
from inftda_duckdb.core.accounting import plan_budget
from inftda_duckdb.core.errors import InputError, InternalError
from inftda_duckdb.core.randomness import RandomSource
from inftda_duckdb.core.topdown import release_tree
from inftda_duckdb.tools.cli import main

HAS_NUMBA = importlib.util.find_spec("numba") is not None
HAS_CC = (shutil.which((os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0])
          is not None and (shutil.which("c++") or shutil.which("g++")) is not None)
REQUIRED = os.environ.get("INFTDA_TEST_BUILD") == "required"  # (.ci/run: never skipped there)
needs_build = pytest.mark.skipif(not (HAS_NUMBA and HAS_CC) and not REQUIRED,
                                 reason="the build needs numba (the fast extra) and a C/C++ "
                                 "compiler")
TESTS = Path(__file__).resolve().parent
ROOT = os.getuid() == 0


def fake_build(directory: Path, content: bytes = b"not an ELF file") -> Path:
    """A file where the current build would be (only ever imported if trusted)."""
    directory.mkdir(mode=0o700, exist_ok=True)
    path = _kernel_aot.module_path(directory, _kernel_aot.key())
    path.write_bytes(content)
    path.chmod(0o600)
    return path


@pytest.fixture
def fresh(monkeypatch):
    """A process that has not loaded the kernel yet (auto; no build tried)."""
    monkeypatch.delenv(kernel.ENV, raising=False)
    for name, value in (("_COMPILED", {}), ("_BUILT", []), ("_MISSING", []), ("_STARTED", []),
                        ("_LARGE", [])):
        monkeypatch.setattr(kernel, name, value)


def test_a_missing_build_is_not_loaded(tmp_path):
    functions, why = _kernel_aot.load(tmp_path / "absent")
    assert functions == {} and why.startswith("not built")


def untrust(path: Path, how: str) -> None:
    """Make the build at ``path`` untrustworthy in the way ``how``."""
    if how == "file writable by others":
        path.chmod(0o666)
    elif how == "directory writable by group":
        path.parent.chmod(0o770)
    elif how == "parent writable by others":
        path.parent.parent.chmod(0o777)
    elif how == "file is a symlink":
        real = path.with_name("real.so")
        path.rename(real)
        path.symlink_to(real)
    elif how == "directory is a symlink":
        real = path.parent.with_name("real")
        path.parent.rename(real)
        path.parent.symlink_to(real)
    else:  # "another user's file"
        os.chown(path, 12345, 12345)


WAYS = ["file writable by others", "directory writable by group", "parent writable by others",
        "file is a symlink", "directory is a symlink",
        pytest.param("another user's file",
                     marks=pytest.mark.skipif(not ROOT, reason="chown needs root"))]


@pytest.mark.parametrize("how", WAYS)
def test_an_untrusted_build_is_refused_before_it_is_imported(tmp_path, how):
    (tmp_path / "p").mkdir(mode=0o700)
    path = fake_build(tmp_path / "p" / "k")
    assert _kernel_aot.load(path.parent)[1].startswith("does not load")  # trusted: imported
    untrust(path, how)
    functions, why = _kernel_aot.load(path.parent)
    assert functions == {} and why.startswith("refused"), why  # (never imported)


@pytest.mark.parametrize("how", ["a corrupt file", "directory writable by group", WAYS[-1]])
def test_a_release_falls_back_silently_to_the_same_outputs(tmp_path, monkeypatch, fresh, how):
    path = fake_build(tmp_path / "k")
    if how != "a corrupt file":
        untrust(path, how)
    monkeypatch.setenv(_kernel_aot.ENV_DIR, str(path.parent))
    rng = np.random.default_rng(5)
    leaves, counts = random_leaves(rng, [4, 60_000], 5000)  # level 2: blocks >= MIN_CELLS
    plan = plan_budget(2, rho=Fraction(1, 2))
    got = release_tree(leaves, counts, [4, 60_000], plan, RandomSource.from_seed(4))
    assert kernel._BUILT and not kernel._BUILT[0].startswith("loaded")  # tried, not used
    assert kernel._COMPILED == {} and not kernel._STARTED
    monkeypatch.setenv(kernel.ENV, "numpy")
    want = release_tree(leaves, counts, [4, 60_000], plan, RandomSource.from_seed(4))
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_check_loads_no_build_under_auto(fresh):
    # a small release never pays for the kernel: engines call check() before every charge
    kernel.check()
    kernel.wanted(kernel.MIN_CELLS - 1)
    assert kernel._BUILT == [] and kernel._COMPILED == {}


def test_the_key_follows_what_the_machine_code_depends_on(monkeypatch):
    before = _kernel_aot.key()
    assert _kernel_aot.key() == before and len(before) == 16
    changes = [(_kernel_aot, "_numba_version", lambda: "numba-0.0.dist-info"),
               (_kernel_aot, "_cpu", lambda: "fpu sse2"),
               (_kernel_aot, "_SOURCES", ("_kernel_numba.py",)),
               (_kernel_aot, "EXPORTS", {**kernel.EXPORTS, "lookup": "int64(uint64[::1])"}),
               (intopt, "_SAFE_LIMIT", intopt._SAFE_LIMIT // 2)]
    for module, name, value in changes:
        with monkeypatch.context() as m:
            m.setattr(module, name, value)
            assert _kernel_aot.key() != before, name
    assert _kernel_aot.key() == before


def test_the_key_hashes_every_constant_the_kernel_imports():
    tree = ast.parse((_kernel_aot._HERE / "_kernel_numba.py").read_text())
    imported = {(node.module, alias.name) for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1
                for alias in node.names}
    assert imported == {(m, n) for m, names in _kernel_aot._CONSTANTS.items() for n in names}


def test_the_default_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(_kernel_aot.ENV_DIR, str(tmp_path / "d"))
    assert _kernel_aot.default_dir() == tmp_path / "d"
    monkeypatch.delenv(_kernel_aot.ENV_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _kernel_aot.default_dir() == tmp_path / "inftda-duckdb"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored (XDG's rule)
    assert _kernel_aot.default_dir() == Path.home() / ".cache" / "inftda-duckdb"


def test_the_kernels_arguments_are_checked_against_its_signatures(monkeypatch):
    # pycc's wrappers read any array as the signature says: a wrong dtype or stride would be
    # misread silently (the JIT would have compiled another specialisation)
    calls: list[int] = []
    fake = {name: lambda *args: calls.append(1) or 0 for name in kernel.EXPORTS}
    monkeypatch.setattr(kernel, "_COMPILED", fake)
    words = np.zeros((8, 2), np.uint64)
    table, out, cdf = np.zeros(4, np.int64), np.zeros(16, np.int64), np.ones(2, np.uint64)
    kernel.lookup(words[:, 0], table, 62, cdf, 63, out[:8])  # strided words: their 'A'
    for bad in [(words[:, 0].view(np.int64), table, cdf, out[:8]),
                (words[:, 0], table, cdf, out[::2]), (words, table, cdf, out[:8]),
                (words[:, 0], table.astype(np.int32), cdf, out[:8]),
                (words[:, 0], table, cdf.view(np.int64), out[:8])]:
        with pytest.raises(InternalError, match="kernel lookup's argument"):
            kernel.lookup(bad[0], bad[1], 62, bad[2], 63, bad[3])
    kernel.spread(words[:4, 0].copy(), words[:2, 0].copy(), words[:, 1])  # a strided out
    with pytest.raises(InternalError, match="kernel spread's argument 0"):
        kernel.spread(words[:4, 0], words[:2, 0].copy(), words[:, 1])
    x, c = np.zeros(12, np.int64), np.zeros(3, np.int64)
    kernel.intopt_kept(x, 4, c, x[:0], x[:0])
    with pytest.raises(InternalError, match="kernel solve_block's argument 2"):
        kernel.intopt_kept(x, 4, np.zeros(6, np.int64)[::2], x[:0], x[:0])
    assert calls == [1, 1, 1]


def test_check_explains_a_missing_or_refused_build(tmp_path, capsys):
    assert main(["build-kernel", "--dir", str(tmp_path), "--check"]) == 2
    out = capsys.readouterr().out
    assert "build: not built" in out and "releases: numpy" in out
    assert f"INFTDA_KERNEL_DIR={tmp_path}" in out  # not where releases look
    path = fake_build(tmp_path / "k")
    path.chmod(0o622)
    assert main(["build-kernel", "--dir", str(path.parent), "--check"]) == 2
    assert f"build: refused: {path} is writable by others" in capsys.readouterr().out


def test_build_errors_name_what_is_missing_and_the_fix(tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(_kernel_build.importlib.util, "find_spec",
                        lambda name, *a: None if name == "numba" else real(name, *a))
    assert main(["build-kernel", "--dir", str(tmp_path / "k")]) == 2
    err = capsys.readouterr().err
    assert "needs numba" in err and "Fix: pip install 'inftda-duckdb[fast]'" in err
    monkeypatch.setattr(_kernel_build.importlib.util, "find_spec", real)
    monkeypatch.setattr(_kernel_build, "_needs", lambda *a: None)  # (as if installed)
    monkeypatch.setenv("CC", "/no/such/cc")
    with pytest.raises(InputError, match=r"CC must name a C and C\+\+ compiler.*'/no/such/cc'"):
        _kernel_build.build(tmp_path / "k")
    monkeypatch.setattr(_kernel_build, "_compiler", lambda: "cc")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # (past the umask)
    with pytest.raises(InputError, match=r"only you \(or root\) can write.*chmod go-w"):
        _kernel_build.build(shared / "k")
    assert not (shared / "k").exists()  # not created where others could swap it


# ----------------------------------------------------------------------------- with a build


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> _kernel_build.Built:
    if not (HAS_NUMBA and HAS_CC) and not REQUIRED:
        pytest.skip("the build needs numba (the fast extra) and a C/C++ compiler")
    return inftda_duckdb.build_kernel(str(tmp_path_factory.mktemp("kernel") / "cache"))


@pytest.mark.slow
@needs_build
def test_the_build_releases_the_gil_and_is_reused(built, capsys):
    # the wrappers release the GIL around the call: pycc's stock build never references it
    assert b"PyEval_SaveThread" in built.path.read_bytes()
    assert built.fresh and built.path.stat().st_mode & 0o022 == 0
    assert [p.name for p in built.path.parent.iterdir()] == [built.path.name]  # no leftovers
    again = _kernel_build.build(built.path.parent)
    assert not again.fresh and again.path == built.path
    assert main(["build-kernel", "--dir", str(built.path.parent), "--check"]) == 0
    assert "releases: this build" in capsys.readouterr().out


def run(code: str, directory: Path, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != kernel.ENV}
    environ.update({_kernel_aot.ENV_DIR: str(directory)}, **env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=environ, timeout=300, check=False, cwd=TESTS)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
@needs_build
def test_the_build_computes_the_numpy_paths_integers_without_numba(built):
    out = run("""
        import sys
        import numpy as np
        from inftda_duckdb.core import kernel
        import test_kernel as T
        assert kernel.wanted(1)  # INFTDA_KERNEL=numba: the build first
        assert kernel._BUILT[0].startswith("loaded") and "numba" not in sys.modules
        rng = np.random.default_rng(3)
        for kind in ["noisy", "dense", "wide", "ties", "negative", "zero"]:
            for width in [1, 2, 3, 7, 40, 41, 300]:
                x, c = T.rows(rng, int(rng.integers(1, 40)), width, kind)
                T.assert_same(x, c)
        words = rng.integers(0, 2**63, (5000, 2), dtype=np.uint64)
        table = np.arange(-64, 64, dtype=np.int64)
        out = np.empty(5000, np.int64)
        # a strided view, as noise passes it (no searched bucket: the table alone)
        kernel.lookup(words[:, 0], table, 57, np.ones(1, np.uint64), 63, out)
        assert np.array_equal(out, table[words[:, 0] >> np.uint64(57)])
        parents, kids = words[:50, 0].copy(), words[:40, 1].copy()
        kernel.spread(parents, kids, words[:2000, 0])
        assert np.array_equal(words[:2000, 0], (parents[:, None] + kids).ravel())
        for hi in (12, 30, 50):  # 1, 3 and 5 passes of the radix sort
            a = np.unique(rng.integers(0, 2 ** (hi - 3), 70_000)) << 3 | rng.integers(0, 8)
            want = np.sort(a)
            rng.shuffle(a)
            kernel.sort(a, 3, hi)
            assert np.array_equal(a, want)
        from inftda_duckdb.core import topdown
        chunk = lambda a, b: (want[a:b] >> 3, want[a:b] & 7)
        assert all(np.array_equal(x, y) for x, y in zip(  # the compiled pass and numpy's
            topdown.truth._up_pairs(want, 3, 40, chunk)[1:],
            topdown.truth._up(want.size, chunk, 40, np.int8, check=True, keep=False)[1:]))
        import os
        from inftda_duckdb.core.accounting import plan_budget
        from inftda_duckdb.core.randomness import RandomSource
        leaves, counts = T.random_leaves(rng, [4, 9, 40], 3000)
        releases = []
        for choice in ("numba", "numpy"):  # the last level straight from the leaves, or not
            os.environ["INFTDA_KERNEL"] = choice
            releases.append(topdown.release_tree(leaves, counts, [4, 9, 40], plan_budget(3, rho=1),
                                                 RandomSource.from_seed(8)))
        assert all(np.array_equal(a, b) for a, b in zip(*releases))
        print("numba" in sys.modules)
    """, built.path.parent, INFTDA_KERNEL="numba")
    assert out.split() == ["False"]


@pytest.mark.slow
@needs_build
def test_auto_uses_a_build_from_the_first_large_block_without_numba(built):
    # Regression (issue 17: a fresh process's first release): auto kept a process's first
    # large level on numpy, since loading numba cost more than the kernel saved there
    out = run("""
        import os, sys
        from fractions import Fraction
        import numpy as np
        from inftda_duckdb.core import kernel
        from inftda_duckdb.core.accounting import plan_budget
        from inftda_duckdb.core.randomness import RandomSource
        from inftda_duckdb.core.topdown import release_tree
        from test_kernel import random_leaves
        calls = []
        for name in ("intopt_kept", "intopt_pairs"):  # (the last level reads the leaves)
            solve = getattr(kernel, name)
            setattr(kernel, name, lambda *a, solve=solve: calls.append(a[0].size) or solve(*a))
        leaves, counts = random_leaves(np.random.default_rng(5), [4, 60_000], 5000)
        plan = plan_budget(2, rho=Fraction(1, 2))
        got = release_tree(leaves, counts, [4, 60_000], plan, RandomSource.from_seed(4))
        print(len(calls) > 0 and min(calls) >= kernel.MIN_CELLS, "numba" in sys.modules)
        os.environ["INFTDA_KERNEL"] = "numpy"
        want = release_tree(leaves, counts, [4, 60_000], plan, RandomSource.from_seed(4))
        print(all(np.array_equal(a, b) for a, b in zip(got, want, strict=True)))
    """, built.path.parent)
    assert out.split() == ["True", "False", "True"]
