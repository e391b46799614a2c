"""The DuckDB engine: per-connection UDFs and table macros, public domains resolved in the
catalog, the generated release statement, and the per-level metrics (curator only)."""
