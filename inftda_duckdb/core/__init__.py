"""The engine-neutral core: exact numbers, randomness, noise, IntOpt, accounting, the top-down
level step and the validated release request. numpy/Arrow in and out; nothing here imports an
engine (DuckDB or Spark), so every engine drives the same code and a seeded release is the same
on all of them."""
