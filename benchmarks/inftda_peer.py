"""Run inf-tda 0.1 (the paper authors' package) on leaf counts from a Parquet file.

Runs inside inf-tda's own virtual environment (python>=3.9, inf-tda, opendp==0.12.*, pandas,
pyarrow); benchmarks/run_all.py calls it through subprocess. Usage:

    python inftda_peer.py SPEC.json OUT.json

SPEC: {"parquet": path, "columns": [...], "labels": [[...], ...] (the product domain, in
hierarchy order), "epsilon": e, "delta": d, "runs": R}. The leaf counts file has the hierarchy
columns and ``n``. Each run: read the Parquet file, build the pandas Series over *every* cell of
the product domain (inf-tda's input format), release, and compute per-level max absolute error
against the truth. OUT gets the timings of each step, the peak RSS and the errors.
"""

import json
import sys
import time

import numpy as np
import pandas as pd
from InfTDA.mechanism import inf_tda
from results import peak_rss_mb


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    cols, labels = spec["columns"], spec["labels"]
    out = {"read_s": [], "build_s": [], "release_s": [], "max_abs_error": [], "released_nodes": []}
    full = pd.MultiIndex.from_product(labels, names=cols)
    for _ in range(spec["runs"]):
        t0 = time.perf_counter()
        leaves = pd.read_parquet(spec["parquet"])
        t1 = time.perf_counter()
        for c in cols:
            leaves[c] = leaves[c].astype(str)
        series = leaves.set_index(cols)["n"].astype(int).reindex(full, fill_value=0)
        t2 = time.perf_counter()
        released = inf_tda(series, (float(spec["epsilon"]), float(spec["delta"])), 1)
        t3 = time.perf_counter()
        out["read_s"].append(t1 - t0)
        out["build_s"].append(t2 - t1)
        out["release_s"].append(t3 - t2)
        released.index.names = cols
        rel = released.reindex(full, fill_value=0).to_numpy(np.int64)
        true = series.to_numpy(np.int64)
        errs, nodes = [], []
        shape = [len(x) for x in labels]
        t_arr, r_arr = true.reshape(shape), rel.reshape(shape)
        for k in range(1, len(cols) + 1):  # prefix sums over the trailing axes
            axes = tuple(range(k, len(cols)))
            tk, rk = t_arr.sum(axis=axes), r_arr.sum(axis=axes)
            errs.append(int(np.abs(tk - rk).max()))
            nodes.append(int((rk > 0).sum()))
        out["max_abs_error"].append(errs)
        out["released_nodes"].append(nodes)
    out["peak_rss_mb"] = peak_rss_mb()
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
