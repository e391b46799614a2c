"""Loading the compiled kernel fails safe (issue 33, D5): before the charge, or on numpy's path.

numba's on-disk cache (core/kernel/_cache.py): a file damaged in place, cut short or of unknown
origin is never handed to numba, it is compiled again; a seeded release through a damaged cache
neither crashes nor changes (slow: numba compiles the kernel cold in a fresh cache). Without
numba, ``INFTDA_KERNEL=numba`` is refused before the charge and ``auto`` releases the same
integers. Each runs in a fresh process (NUMBA_CACHE_DIR a temporary folder), so a crash is a
failed test, not a failed session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pinned
import pytest

from inftda_duckdb.core import kernel
from inftda_duckdb.core.kernel import _cache
from inftda_duckdb.core.kernel.contract import SIGNATURES

HERE = Path(__file__).resolve().parents[1]  # tests/ (pinned.py)
ROOT = HERE.parent
needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                 reason="numba is not installed (a dependency: reinstall)")


def run(code: str, cache: Path | None, *args: str,
        **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` (with ``args``) in a fresh Python (this checkout and tests/ on its path),
    numba's cache in ``cache``; the last line of its stdout is JSON."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "INFTDA_"))}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), str(Path(__file__).parent),
                                             environ.get("PYTHONPATH", "")])
    if cache is not None:
        environ["NUMBA_CACHE_DIR"] = str(cache)
    environ.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                          text=True, env=environ, timeout=1800, check=False)


def result(out: subprocess.CompletedProcess[str]) -> dict:
    assert out.returncode == 0, (out.returncode, out.stderr[-3000:])  # (-11: a segfault)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "cut short":
        path.write_bytes(data[: len(data) // 2])
    else:  # bytes changed in place, inside the machine code (a pickled bytes object)
        at = len(data) // 10
        data[at: at + 16] = bytes(b ^ 0xFF for b in data[at: at + 16])
        path.write_bytes(bytes(data))


# ------------------------------------------------------------ the check of numba's cache files
TOY = """
def triple(a, out):
    for i in range(a.shape[0]):
        out[i] = 3 * a[i]
    return a.shape[0]
"""
TOY_STEPS = """
    import json, shutil, sys
    from pathlib import Path
    import numpy as np
    from test_kernel_loading import damage
    from inftda_duckdb.core.kernel import _cache
    sys.path.insert(0, sys.argv[1])
    import toy
    cache = Path(sys.argv[2])  # (NUMBA_CACHE_DIR)
    def step(steps):
        f = _cache.compiled(toy, {"triple": "int64(int64[::1], int64[::1])"})["triple"]
        out = np.zeros(4, np.int64)
        f(np.arange(4), out)
        steps.append([out.tolist(), sum(f.stats.cache_hits.values()),
                      sum(f.stats.cache_misses.values())])
    found = {}
    for how in sys.argv[3:]:
        shutil.rmtree(cache, ignore_errors=True)
        steps = []
        step(steps)  # compiled, written, recorded
        step(steps)  # loaded
        record = next(cache.rglob(_cache.RECORD))
        if how == "no record":
            record.unlink()
        elif how == "a damaged record":
            record.write_text("{not json")
        else:
            damage(next(cache.rglob("toy.*.nbc")), how)
        step(steps)  # never loaded: compiled again, written anew
        step(steps)  # loaded from the new file
        files = sorted(p.name for p in cache.rglob("toy.*") if p.suffix in (".nbi", ".nbc"))
        found[how] = {"steps": steps, "files": files,
                      "recorded": sorted(json.loads(record.read_text()))}
    print(json.dumps(found))
"""


@needs_numba
def test_a_damaged_or_unrecorded_cache_file_is_compiled_again(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "toy.py").write_text(TOY)
    cases = ["bytes changed in place", "cut short", "no record", "a damaged record"]
    out = result(run(TOY_STEPS, tmp_path / "cache", str(tmp_path / "src"),
                     str(tmp_path / "cache"), *cases))
    answer = [0, 3, 6, 9]
    for how in cases:
        steps = [[answer, 0, 1], [answer, 1, 0], [answer, 0, 1], [answer, 1, 0]]
        assert out[how]["steps"] == steps, how  # [out, cache hits, misses] at each step
        assert out[how]["recorded"] == out[how]["files"] and len(out[how]["files"]) == 2


@needs_numba
def test_a_cache_numba_cannot_use_leaves_the_kernel_compiled_in_memory(monkeypatch):
    calls: list[bool] = []

    def compiled(module, signatures, *, on_disk=True):
        calls.append(on_disk)
        if on_disk:
            raise RuntimeError("cannot cache function: no locator available")
        return {name: (lambda *a: 0) for name in signatures}

    monkeypatch.setattr(_cache, "compiled", compiled)
    for name, value in (("_COMPILED", {}), ("_MISSING", [])):
        monkeypatch.setattr(kernel, name, value)
    kernel._load()
    assert calls == [True, False] and set(kernel._COMPILED) == set(SIGNATURES)
    assert kernel._MISSING == []


@needs_numba
def test_numbas_jit_disabled_is_no_kernel(monkeypatch):
    # NUMBA_DISABLE_JIT (a debugging switch) would run the kernel's loops as Python: numpy's path
    import numba

    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)
    for name, value in (("_COMPILED", {}), ("_MISSING", [])):
        monkeypatch.setattr(kernel, name, value)
    kernel._load()
    assert kernel._COMPILED == {} and "NUMBA_DISABLE_JIT" in kernel._MISSING[0]


# ------------------------------------------------------------------ whole releases, fresh processes
RELEASE = """
    import json, warnings
    import duckdb, pinned
    import inftda_duckdb
    from inftda_duckdb.core import kernel
    warnings.simplefilter("ignore")
    con = duckdb.connect()
    inftda_duckdb.load(con)
    con.register("trips_arrow", pinned.trips())
    con.execute("CREATE TABLE trips AS SELECT * FROM trips_arrow")
    inftda_duckdb.set_budget(con, "trips", rho=10)
    try:
        table = inftda_duckdb.release(con, "trips", pinned.COLUMNS, seed=pinned.SEED,
                                      **pinned.CASES["flat"])
        digest, error = pinned.digest([tuple(r.values()) for r in table.to_pylist()]), None
    except inftda_duckdb.InftdaError as exc:
        digest, error = None, str(exc)
    charges = con.execute("SELECT count(*) FROM inftda_ledger").fetchone()[0]
    print(json.dumps({"digest": digest, "error": error, "charges": charges,
                      "compiled": sorted(kernel._COMPILED), "missing": kernel._MISSING}))
"""


@needs_numba
@pytest.mark.slow
def test_a_release_through_a_damaged_numba_cache_neither_crashes_nor_changes(tmp_path):
    # Regression (issue 33, D5): compiled code loaded from a damaged cache ran after the charge
    # (the ahead-of-time build: SIGBUS; numba's own cache, a file changed in place: SIGSEGV)
    cache = tmp_path / "numba"
    cold = result(run(RELEASE, cache, INFTDA_KERNEL="numba"))  # compiles, fills the cache
    assert cold["digest"] == pinned.PINNED["flat"] and cold["charges"] == 1
    assert cold["compiled"] == sorted(SIGNATURES)
    files = {p.name: p for p in cache.rglob("*.nbc")}
    solve = next(p for name, p in files.items() if "solve_block" in name)
    look = next(p for name, p in files.items() if ".lookup-" in name)
    damage(solve, "bytes changed in place")  # (loaded as it is: a segfault in the release)
    damage(look, "cut short")
    again = result(run(RELEASE, cache, INFTDA_KERNEL="numba"))
    assert again == cold


NO_NUMBA = """
    import importlib.abc, sys
    class NoNumba(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "numba" or name.startswith("numba."):
                raise ImportError("No module named 'numba' (hidden by the test)")
    sys.meta_path.insert(0, NoNumba())
"""


def test_numba_forced_without_numba_is_refused_before_the_charge(tmp_path):
    forced = result(run(NO_NUMBA + RELEASE, tmp_path, INFTDA_KERNEL="numba"))
    assert forced["charges"] == 0 and forced["digest"] is None
    assert "INFTDA_KERNEL" in forced["error"] and "numba" in forced["error"]
    assert "did not load" in forced["error"] and "No module named 'numba'" in forced["error"]
    auto = result(run(NO_NUMBA + RELEASE, tmp_path))  # control: auto takes numpy's path
    assert auto["digest"] == pinned.PINNED["flat"] and auto["charges"] == 1
    assert auto["compiled"] == []
