-- The user-facing table macros, created by inftda_duckdb.load(con) as TEMP macros of the
-- connection and in the default database for its cursors (see duckdb/connections.py).
--
-- $parameters and $fields are the macro's options, rendered from the option table
-- (inftda_duckdb/core/options.py: macro_parameters, macro_fields).
--
-- DuckDB's Python API has no table functions, so each macro is SELECT * FROM query(<SQL text>)
-- where the text is rendered at bind time by a side-effect-free Python UDF ($generator, one per
-- connection) from the arguments passed as JSON. Rendering is cheap, deterministic and draws no
-- noise; DESCRIBE / EXPLAIN cost nothing. current_query_id() binds the capability token of the
-- rendered statement to the statement being run (see inftda_duckdb/duckdb/capabilities.py).
-- 'session': the statement being bound (current_query(): the public-facing mode refuses EXPLAIN
-- of the functions, read with DuckDB's parser), profiling and logging. A relation of DuckDB's
-- Python API is bound first outside any statement (current_query_id() is then 2**64 - 1 and
-- current_query() would fail with an internal error: NULL instead); whatever runs it, or
-- explains it, binds it again under its own statement. DuckDB's own functions are named as
-- system.main.<name>: a macro of the same name (TEMP, or kept in a database file) would
-- otherwise answer for them (current_query() lying to the EXPLAIN check, query() rewriting
-- the release).
-- Cost of inftda_release: one full release per EXECUTION (fresh noise, charged to the ledger);
-- use CREATE TABLE ... AS SELECT * FROM inftda_release(...) and query the table.
-- Cost of inftda_preview: nothing (no budget; reads only public domains, except with
-- domain_from_data := true, which reads the private table's distinct values).

-- @release_macro
inftda_release(
    source, columns, $parameters
) AS TABLE SELECT * FROM system.main.query($generator(system.main.to_json({
    'source': source, 'columns': columns, $fields,
    'current_database': system.main.current_database(),
    'current_schema': system.main.current_schema(),
    'search_path': system.main.current_setting('search_path'),
    'query_id': system.main.current_query_id(),
    'memory_limit': system.main.current_setting('memory_limit'),
    'session': {'query': CASE WHEN system.main.current_query_id() = 18446744073709551615
                              THEN NULL ELSE system.main.current_query() END,
                'profiling': system.main.current_setting('enable_profiling'),
                'logging': {'on': system.main.current_setting('enable_logging'),
                            'level': system.main.current_setting('logging_level')}}
})::VARCHAR))

-- @preview_macro
inftda_preview(
    source, columns, $parameters
) AS TABLE SELECT * FROM system.main.query($generator(system.main.to_json({
    'source': source, 'columns': columns, $fields,
    'current_database': system.main.current_database(),
    'current_schema': system.main.current_schema(),
    'search_path': system.main.current_setting('search_path'),
    'query_id': system.main.current_query_id(),
    'session': {'query': CASE WHEN system.main.current_query_id() = 18446744073709551615
                              THEN NULL ELSE system.main.current_query() END,
                'profiling': system.main.current_setting('enable_profiling'),
                'logging': {'on': system.main.current_setting('enable_logging'),
                            'level': system.main.current_setting('logging_level')}}
})::VARCHAR))
