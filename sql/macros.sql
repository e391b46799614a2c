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
-- Cost of inftda_release: one full release per EXECUTION (fresh noise, charged to the ledger);
-- use CREATE TABLE ... AS SELECT * FROM inftda_release(...) and query the table.
-- Cost of inftda_preview: nothing (no budget; reads only public domains, except with
-- domain_from_data := true, which reads the private table's distinct values).

-- @release_macro
inftda_release(
    source, columns, $parameters
) AS TABLE SELECT * FROM query($generator(to_json({
    'source': source, 'columns': columns, $fields,
    'current_database': current_database(), 'current_schema': current_schema(),
    'search_path': current_setting('search_path'), 'query_id': current_query_id(),
    'memory_limit': current_setting('memory_limit'),
    'session': {'profiling': current_setting('enable_profiling')}
})::VARCHAR))

-- @preview_macro
inftda_preview(
    source, columns, $parameters
) AS TABLE SELECT * FROM query($generator(to_json({
    'source': source, 'columns': columns, $fields,
    'current_database': current_database(), 'current_schema': current_schema(),
    'search_path': current_setting('search_path'), 'query_id': current_query_id(),
    'session': {'profiling': current_setting('enable_profiling')}
})::VARCHAR))
