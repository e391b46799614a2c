-- inftda_release: the SQL statement that performs one whole InfTDA release (paper, Algorithm 1).
--
-- Rendered by inftda_duckdb/sqlgen.py from the fragments below (each starts with "-- @name";
-- $placeholders are filled with quoted identifiers, literals or generated lists, never raw user
-- text). Parameters: the source (table, view or a unit-clipping subquery), the hierarchy columns
-- k1..kd, each column's public domain, the release spec (JSON, including the budget) and the
-- per-connection UDF names.
-- Cost: ONE scan of the source (the leaf-level GROUP BY; a privacy unit adds a window over it),
-- then one UDF call for all levels over the distinct leaves (work proportional to the leaves plus
-- the noised cells: every child of every released parent). Privacy: each execution is a NEW
-- release with fresh noise and is charged to the ledger by the levels step's first call (once per
-- execution, before any noise is drawn; inftda_begin has checked the statement's capability
-- token and the data first).
-- DuckDB's own functions are named system.main.<name> (as in macros.sql): a macro of the same
-- name (TEMP, or kept in a database file) would otherwise answer for them, e.g. enum_code(x)
-- returning 0 would count every row under the first label (tests/security/test_builtin_shadowing.py).

-- @typed
-- one row of typed NULLs, one per hierarchy column: gives cast_to_type() and typeof() the
-- column's type without knowing it when the SQL is generated (TEMP tables, any type).
typed AS MATERIALIZED (
    SELECT t.* FROM (SELECT 1) AS one LEFT JOIN (SELECT $typed_cols FROM $source LIMIT 0) AS t ON false
)

-- @leaf_raw
-- the only scan of the private data: counts of the distinct raw leaves.
leaf_raw AS $materialized(
    SELECT $raw_cols, $count::BIGINT AS n$unit_nulls FROM $source_rows GROUP BY ALL
)

-- @leaf_keyed
-- every column an ENUM seen in the catalog (its code is free: enum_code), no nesting: the raw
-- leaves are kept under one BIGINT each, kz = the leaf's mixed-radix key ((k1 * s2 + k2) * s3
-- + ...) >= 0, or, for a leaf with a NULL, -1 - the mask of its NULL columns (bit i - 1 for
-- column i; datastats counts each column's NULLs from it). 16 bytes a leaf (the raw and coded
-- columns were ~34), and the key the levels call reads is already there. The GROUP BY stays on
-- the raw columns (DuckDB's perfect hash aggregate takes small ENUM domains; a computed key it
-- cannot).
leaf_coded AS MATERIALIZED (
    SELECT CASE WHEN $all_set THEN $key ELSE -1 - ($mask) END AS kz, * EXCLUDE ($raw)
    FROM leaf_raw
)

-- @unit_source
-- a privacy unit contributes at most $m rows: the m smallest sort keys of a keyed PRF of (unit,
-- row); not DuckDB's random (setseed and scan order would decide), nor other units' rows.
-- Identical rows of a unit are one group of c rows; its candidates i = 0 .. min(c, m) - 1 get the
-- keys E_0 + ... + E_i, E_i = -ln(U_i) / (c - i), U_i from sha256(key ':' i ':' group): the
-- smallest of c Exp(1) keys, so a uniform m-subset of the unit's rows is kept (core/units.py is
-- the reference). Rows with a NULL unit are never pooled: all are kept and counted (inftda_begin
-- refuses them), or dropped. inftda_w: the rows a candidate stands for. inftda_read: the rows
-- the unit had before the cap (on its first kept candidate, 0 elsewhere and for NULL units): a
-- group's count on its first candidate, summed over the unit in the same window (same sort), so
-- the curator's notice of rows kept of rows read costs no other pass.
(SELECT $cols, inftda_unit, inftda_w, CASE WHEN inftda_rn = 1 THEN inftda_t ELSE 0 END AS inftda_read
 FROM (
    SELECT $cols, inftda_unit, inftda_w,
        system.main.row_number() OVER (PARTITION BY inftda_unit ORDER BY inftda_key) AS inftda_rn,
        system.main.sum(inftda_r) OVER (PARTITION BY inftda_unit ORDER BY inftda_key
                            ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS inftda_t
    FROM (
        SELECT $cols, inftda_unit, CASE WHEN inftda_unit IS NULL THEN inftda_c ELSE 1 END AS inftda_w,
            $sort_key AS inftda_key, $reads AS inftda_r
        FROM (SELECT *, $group AS inftda_g$exps
              FROM (SELECT $cols, $unit AS inftda_unit, system.main.count(*) AS inftda_c
                    FROM $source GROUP BY ALL) CROSS JOIN inftda_rk)
    )
) WHERE (inftda_rn <= $m OR inftda_unit IS NULL) AND $keep_null)

-- @unit_key_one
-- m = 1: one candidate per group, E_0 (no lists)
-system.main.ln($u0) / inftda_c

-- @unit_exps
-- m > 1: the group's E_i, i = 0 .. min(c, m) - 1
, CASE WHEN inftda_unit IS NULL THEN []::DOUBLE[] ELSE system.main.list_transform(system.main.range(system.main.least(inftda_c, $m)),
    lambda i: -system.main.ln($ui) / (inftda_c - i)) END AS inftda_e

-- @unit_keys
-- m > 1: one row per candidate, keyed E_0 + ... + E_i
system.main.unnest(CASE WHEN inftda_unit IS NULL THEN [0.0]
       ELSE system.main.list_transform(system.main.range(1, system.main.len(inftda_e) + 1), lambda j: system.main.list_sum(inftda_e[1:j])) END)

-- @unit_reads_one
-- m = 1: the group's rows read, on its one candidate (NULL units: not counted)
CASE WHEN inftda_unit IS NULL THEN 0 ELSE inftda_c END

-- @unit_reads
-- m > 1: the group's rows read on its first candidate, 0 on the others (unnested beside
-- @unit_keys: lists of the same length, zipped)
system.main.unnest(CASE WHEN inftda_unit IS NULL THEN [0::BIGINT]
       ELSE system.main.list_transform(system.main.range(system.main.len(inftda_e)), lambda j: CASE WHEN j = 0 THEN inftda_c ELSE 0 END) END)

-- @unit_u
-- U_i in (0, 1): 52 bits of sha256(row key ':' i ':' group), plus one half
((('0x' || system.main.left(system.main.sha256(inftda_k || ':' || $i || ':' || inftda_g), 13))::BIGINT + 0.5)
 / 4503599627370496.0)

-- @row_key
-- the row key of this execution (ONE call, MATERIALIZED): 128 bits from the OS, or from seed :=
inftda_rk AS MATERIALIZED (SELECT $rowkey($seed) AS inftda_k)

-- @dom_list
-- explicit public domain of level $i: labels (text) in code order, cast to the column's type;
-- $labels is a range() for integer progressions, else one JSON array literal (fast to parse)
dom${i}_l AS MATERIALIZED (
    SELECT l.label, l.code::INTEGER AS code, try(system.main.cast_to_type(l.label, t.v$i)) AS v
    FROM ($labels) AS l(label, code) CROSS JOIN typed AS t
)

-- @dom_enum
-- ENUM labels of level $i (from the type name, so the SQL binds on any type; a non-ENUM column
-- gives an empty domain, reported by inftda_begin as a missing domain)
$name AS MATERIALIZED (
    SELECT l.label, (l.i - 1)::INTEGER AS code, try(system.main.cast_to_type(l.label, t.v$i)) AS v
    FROM (
        SELECT system.main.unnest(lst) AS label, system.main.generate_subscripts(lst, 1) AS i FROM (
            SELECT system.main.list_transform(system.main.regexp_extract_all(
                CASE WHEN system.main.typeof(v$i) LIKE 'ENUM(%' THEN system.main.typeof(v$i) ELSE '' END,
                '''((?:[^'']|'''')*)''', 1), lambda x: system.main.replace(x, '''''', '''')) AS lst
            FROM typed)
    ) AS l CROSS JOIN typed AS t
)

-- @dom_table
-- level $i's domain from a public domain table: the ENUM labels if the column is an ENUM (the
-- table then only nests), else the distinct values of the table's column, sorted
dom${i}_l AS MATERIALIZED (
    SELECT label, code, v FROM dom${i}_e
    UNION ALL
    SELECT NULL::VARCHAR, (system.main.row_number() OVER (ORDER BY w) - 1)::INTEGER, w
    FROM (SELECT DISTINCT try(system.main.cast_to_type(x.$tcol, t.v$i)) AS w FROM $table AS x CROSS JOIN typed AS t)
    WHERE w IS NOT NULL AND (SELECT system.main.typeof(v$i) FROM typed) NOT LIKE 'ENUM(%'
)

-- @dom_data
-- level $i's domain read from the PRIVATE data (domain_from_data: not private)
dom${i}_l AS MATERIALIZED (
    SELECT NULL::VARCHAR AS label, (system.main.row_number() OVER (ORDER BY r$i) - 1)::INTEGER AS code, r$i AS v
    FROM (SELECT DISTINCT r$i FROM leaf_raw WHERE r$i IS NOT NULL)
)

-- @dom
dom$i AS (SELECT v, code FROM dom${i}_l WHERE v IS NOT NULL)

-- @nest
-- domain table $t coded: one row per distinct combination it lists (NULL code = a defect)
nest$t AS MATERIALIZED (
    SELECT DISTINCT $nest_codes, ($nest_defect) AS defect, ($nest_text) AS txt
    FROM (SELECT $nest_casts FROM $table AS x CROSS JOIN typed AS t) AS w $nest_joins
)

-- @nest_ok
nestok$t AS (SELECT DISTINCT $nest_keys, true AS ok FROM nest$t WHERE NOT defect)

-- @leaf_coded
-- raw leaves joined to their domains: NULL code = NULL or undeclared value
leaf_coded AS MATERIALIZED (
    SELECT l.*, $code_cols FROM leaf_raw AS l $code_joins
)

-- @nest_values
-- domain table $t's allowed combinations by value (codes decoded through the domains): the
-- leaves find their codes and their nesting in ONE join per table on their raw combination
nestv$t AS (SELECT DISTINCT $values, $keys FROM nestok$t AS o $joins)

-- @leaf_hit
-- raw leaves joined to each domain table's allowed combinations (one join per table instead of
-- one per column and one per table) and to the other columns' domains: a hit has every code
-- and lies inside every nesting (kept); the rows that miss (NULLs, undeclared values or
-- combinations: refused or dropped) go to @leaf_miss
leaf_hit AS MATERIALIZED (
    SELECT l.*, $code_cols FROM leaf_raw AS l $code_joins
)

-- @leaf_miss
-- the leaves that missed (none in a valid release), coded column by column as @leaf_coded does:
-- the checks and their errors read the same columns and rows as without domain tables
leaf_miss AS MATERIALIZED (
    SELECT l.*, $code_cols FROM (SELECT * EXCLUDE ($codes) FROM leaf_hit WHERE NOT ($hit)) AS l
    $code_joins
)

-- @leaf_coded_nested
-- every leaf coded (read once, by @leaf: not copied)
leaf_coded AS (SELECT *, $oks FROM leaf_hit WHERE $hit UNION ALL SELECT * FROM leaf_miss)

-- @checks
-- the public/data checks inftda_begin turns into errors BEFORE charging anything; 'session':
-- the statement, the profiling and the logging settings of the caller (the public-facing mode
-- refuses EXPLAIN, profiling and DuckDB's operator logs: they show the data's row counts). One row: the typed row (the
-- ENUM columns' checks read it) and, for a release, the data stats (s) in its FROM, not as
-- scalar subqueries (~0.25 ms less to plan)
checks AS (SELECT system.main.to_json({$totals
    'session': {'query': system.main.current_query(), 'profiling': system.main.current_setting('enable_profiling'),
                'logging': {'on': system.main.current_setting('enable_logging'),
                            'level': system.main.current_setting('logging_level')}},
    'columns': [$column_checks],
    'nestings': [$nest_checks]
})::VARCHAR AS j FROM typed$stats)

-- @shadow_check
-- the source was given unqualified and resolved outside TEMP at bind time (which cannot see
-- TEMP objects): at execution, does a TEMP table or view of that name shadow it? (ASCII case
-- folded, as DuckDB's binder compares names). duckdb_columns() lists the columns of tables and
-- views alike (each has one at least); database_name = 'temp', DuckDB's TEMP catalog, makes it
-- read that catalog only: ~0.2 ms less than duckdb_tables() and duckdb_views() together
'shadow': (SELECT system.main.count(*) FROM system.main.duckdb_columns()
           WHERE database_name = 'temp' AND NOT internal
             AND system.main.translate(table_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') = $name),

-- @frame_check
-- the source is a TEMP view over a registered pandas DataFrame (catalog only): its ENUM columns
-- are Categoricals, whose categories pandas may have taken from the data (a warning); DuckDB
-- 1.5.0 gives such a view an empty SQL text (no CREATE VIEW can)
'frame': (SELECT system.main.count(*) FROM system.main.duckdb_views()
          WHERE temporary
            AND system.main.translate(view_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') = $name
            AND (sql LIKE '%pandas_scan(%' OR system.main.trim(coalesce(sql, '')) = '')),

-- @column_check
-- level $i's public domain in one query: type, size, labels not valid for the type, duplicates
(SELECT {'type': system.main.typeof(system.main.any_value(t.v$i)), 'size': system.main.count(d.v),
         'bad': system.main.count(d.code) FILTER (d.v IS NULL),
         'bad_examples': (system.main.list(d.label) FILTER (d.v IS NULL))[1:5],
         'dups': system.main.count(d.v) - system.main.count(DISTINCT d.v)}
 FROM typed AS t LEFT JOIN dom${i}_l AS d ON true)

-- @column_check_range
-- a preview of level $i's declared range of $size values: its two ends are cast to the column's
-- type (never the values in between: arithmetic on sizes)
(SELECT {'type': system.main.typeof(t.v$i), 'size': $size,
         'bad': (try(system.main.cast_to_type($first, t.v$i)) IS NULL)::INTEGER
                + (try(system.main.cast_to_type($last, t.v$i)) IS NULL)::INTEGER,
         'bad_examples': CASE WHEN try(system.main.cast_to_type($first, t.v$i)) IS NULL
                               OR try(system.main.cast_to_type($last, t.v$i)) IS NULL
                              THEN [$first, $last] ELSE []::VARCHAR[] END,
         'dups': 0}
 FROM typed AS t)

-- @column_check_enum
-- level $i's ENUM labels: valid and distinct by construction (read from the typed row in the
-- FROM of the checks: no subquery per column, ~0.7 ms less planning for four; no bad labels or
-- duplicates to report: load_checks fills in the zeros, ~0.3 ms less)
{'type': system.main.typeof(v$i), 'size': system.main.len(system.main.enum_range(v$i))}

-- @datastats
-- one pass over the coded leaves: rows, rows kept, and per column NULLs and undeclared values
-- (with a few examples); checks reads its one row as one struct
datastats AS MATERIALIZED (
    $select
)

-- @stats
SELECT coalesce(system.main.sum(n), 0)::BIGINT AS n, coalesce(system.main.sum(n) FILTER ($keep), 0)::BIGINT AS kept,
    $stats
    FROM $leaves

-- @stats_nested
-- with domain tables: the hits are all kept and have no NULL or undeclared value (one sum);
-- the column statistics come from the rows that missed
SELECT h.n + m.n AS n, h.n + m.kept AS kept, m.* EXCLUDE (n, kept$unit)$unit_sum
FROM (SELECT coalesce(system.main.sum(n), 0)::BIGINT AS n$unit_hit FROM leaf_hit WHERE $hit) AS h,
     ($misses) AS m

-- @datastat_enum
-- an ENUM column's values all have a code: only its NULLs are counted (load_checks fills in
-- no unknown values; constant columns here cost ~0.3 ms each to plan and run)
coalesce(system.main.sum(n) FILTER (r$i IS NULL), 0)::BIGINT AS nulls$i

-- @datastat_masks
-- all-ENUM leaves under one key: the rows of each mask of NULL columns (at most 2**d - 1 pairs
-- [mask, rows]; load_checks counts each column's NULLs from them: one small GROUP BY instead of
-- one filtered sum per column, ~1 ms less to plan for four columns)
(SELECT system.main.list([-1 - kz, c]) FROM (SELECT kz, system.main.sum(n)::BIGINT AS c FROM leaf_coded WHERE kz < 0
                                 GROUP BY ALL)) AS masks

-- @datastat
coalesce(system.main.sum(n) FILTER (r$i IS NULL), 0)::BIGINT AS nulls$i,
    coalesce(system.main.sum(n) FILTER (r$i IS NOT NULL AND k$i IS NULL), 0)::BIGINT AS unknown$i,
    system.main.list_sort(system.main.list_distinct(system.main.list(r$i) FILTER (r$i IS NOT NULL AND k$i IS NULL)))[1:5]::VARCHAR[]
        AS examples$i

-- @nest_check
-- (the examples' text is built for the rows outside only: a FILTER clause would build it for
-- every leaf first, ~0.26 s of CPU at 549k leaves)
{'defects': (SELECT system.main.count(*) FILTER (defect) FROM nest$t),
 'defect_examples': (SELECT system.main.list(txt) FILTER (defect) FROM nest$t)[1:5],
 'orphans': (SELECT system.main.count(*) FROM dom$first WHERE code NOT IN (SELECT k$first FROM nest$t WHERE NOT defect)),
 'orphan_examples': (SELECT system.main.list(v::VARCHAR) FROM dom$first WHERE code NOT IN (SELECT k$first FROM nest$t WHERE NOT defect))[1:5],
 'outside': (SELECT coalesce(system.main.sum(n) FILTER (nok$t IS NULL AND $all_coded), 0) FROM $leaves),
 'outside_examples': (SELECT system.main.list(DISTINCT $nest_raw_text) FROM $leaves WHERE nok$t IS NULL AND $all_coded)[1:5],
 'nodes': [$nest_nodes]}

-- @begin
-- ONE call per execution (MATERIALIZED, so every call of the statement is done before the
-- levels step): accepts the spec only with the capability token minted for this statement
-- (current_query_id()), turns the checks into errors; nothing is charged or drawn yet.
inftda_b AS MATERIALIZED (SELECT $begin($spec, j, system.main.current_query_id()) AS b FROM checks)

-- @leaf
-- true leaf counts on codes (one row per leaf: values and codes correspond one to one; rows
-- outside the domain were refused or, with unknown := 'drop', dropped)
leaf AS (SELECT $codes, n FROM leaf_coded WHERE $keep)

-- @prefix_keys_runtime
-- domain sizes known only as the statement runs (domain tables): the keys when the sizes'
-- product is below 2**62 (2 lists instead of one per column and the counts'; ~0.1 s less at
-- 549k leaves of 6 columns), else the codes (only one of the two is built: FILTER)
(SELECT {'k': $klists,
         'key': system.main.list(CASE WHEN z.small THEN $key END) FILTER (z.small), 'n': system.main.list(n)}
 FROM leaf CROSS JOIN (SELECT *, $product < $max AS small
                       FROM (SELECT $sizes) AS z) AS z)

-- @leaf_pairs
-- the leaves as ONE list of (key << b) | n, b the bits of r, the rows kept (2**b is more than
-- any count; inftda_begin read r from the checks), 'n' NULL: half the lists and half their
-- Arrow copy, and the core sorts them as they are (key * 2**b + n: no division to repack).
-- Keys and counts as two lists instead when 2**b times the key span would pass 2**62.
(SELECT {'k': NULL::INTEGER[], 'key': system.main.list(CASE WHEN p.b <= $cap THEN ($key << p.b) | n
                                                ELSE $key END),
         'n': system.main.list(n) FILTER (p.b > $cap)}
 FROM leaf CROSS JOIN (SELECT system.main.length(system.main.bin(kept)) AS b FROM datastats) AS p)

-- @allowed
(SELECT {'k': $klists, 'key': NULL::BIGINT[], 'n': []::BIGINT[]}
 FROM (SELECT DISTINCT $keys FROM nest$t WHERE NOT defect))

-- @levels
-- Algorithm 1, lines 2-9, in ONE UDF call over the true leaf counts (the non-zero ones, as one
-- struct of lists: when the domain sizes were known when planned, product < 2**62, each leaf
-- travels as one BIGINT, its mixed-radix key ((k1 * s2 + k2) * s3 + ...) and count (@leaf_pairs);
-- sizes known as it runs: keys and counts, or one list of codes per column and one of counts
-- when their product passes 2**62, @prefix_keys_runtime) and each nested level's allowed
-- children (NULL: not nested). The call sorts the leaves,
-- derives every level's prefix counts from them and releases level after level: every child of
-- every released parent noised (tree-addressed), IntOpt, children > 0 kept, in blocks of cells run
-- on DuckDB's `threads` worker threads. Returns the released leaves as one row of lists.
-- Not materialized: referenced once, the lists go straight to the unnest below instead of
-- through a copy (~6-9 ms less for CREATE TABLE AS at 240k leaves). The UDF has side effects,
-- so DuckDB evaluates it once per execution (tested on several query shapes); a second call
-- would find its release gone and raise, never return rows.
inftda_e AS (SELECT $levels(b.b.rid, 0, $leaf, [$allowed]::$ptype[],
                            system.main.current_setting('threads')::BIGINT, 0, 0) AS e
             FROM inftda_b AS b),
-- each column's public values in code order: decoding is a list lookup
inftda_dl AS MATERIALIZED (SELECT $lists FROM typed),
inftda_r AS (SELECT $unnest, system.main.unnest(e.e.n) AS n FROM inftda_e AS e)

-- @levels_grouped
-- The same release in parts, for a DuckDB memory_limit too small for every leaf in one list
-- (chosen when the statement is planned, from public sizes only): the levels down to the cut
-- level $cut are released once, from the cut prefixes' true counts (MATERIALIZED: one call, before
-- any part), then the leaves travel in $parts lists, one per run of consecutive cut prefixes
-- (key // $part_radix), each a row of a UDF call that releases the levels below the cut for the
-- cut nodes of its run (noise addressed by the tree: the same release as in one call). Every part
-- is a row of range($parts), leaves or not: a released cut node with no true leaf below it is
-- noised too. DuckDB streams the parts; no list holds more than one part's leaves.
inftda_k AS (SELECT $key AS key, n FROM leaf),
inftda_t AS MATERIALIZED (
    SELECT $levels(b.b.rid, -1, (SELECT {'k': NULL::INTEGER[], 'key': system.main.list(p), 'n': system.main.list(n)}
                                 FROM (SELECT key // $cut_radix AS p, system.main.sum(n)::BIGINT AS n
                                       FROM inftda_k GROUP BY ALL)),
                   [$allowed]::$ptype[], system.main.current_setting('threads')::BIGINT, $cut, $parts) AS t
    FROM inftda_b AS b),
$part_lists,
inftda_e AS (SELECT $levels(t.t.rid, $part, {'k': NULL::INTEGER[], 'key': g.k, 'n': g.n},
                            NULL::$ptype[], system.main.current_setting('threads')::BIGINT, $cut, $parts) AS e
             $part_rows),
-- each column's public values in code order: decoding is a list lookup
inftda_dl AS MATERIALIZED (SELECT $lists FROM typed),
inftda_r AS (SELECT $unnest, system.main.unnest(e.e.n) AS n FROM inftda_e AS e)

-- @part_lists
inftda_g AS (SELECT key // $part_radix AS part, system.main.list(key) AS k, system.main.list(n) AS n
             FROM inftda_k GROUP BY ALL)

-- @part_rows
FROM system.main.range($parts) AS p(i) CROSS JOIN inftda_t AS t
             LEFT JOIN inftda_g AS g ON g.part = p.i

-- @part_lists_batched
-- DuckDB < 2 cannot spill list() states (they live in its aggregate's arena until the statement
-- ends, 20-25 bytes a leaf): one GROUP BY building every part's lists at once runs out of memory
-- (from ~3M leaves under 100MB) where the bare leaf GROUP BY spills. So the parts' lists are
-- built $batches batches of $batch parts at a time, one batch per step of a recursive CTE (DuckDB
-- resets the steps' GROUP BY between steps, freeing its lists; the steps' rows, every batch's
-- lists, collect in a spillable table). The steps are public (a batch number per step, every
-- part of range($parts) a row of its batch, leaves or not); each step scans the leaves for its
-- batch's keys (key // $batch_radix).
inftda_g(b, part, k, n) AS (
    SELECT -1, NULL::BIGINT, NULL::BIGINT[], NULL::BIGINT[]
    UNION ALL
    SELECT q.b, p.i, g.k, g.n
    FROM (SELECT DISTINCT b + 1 AS b FROM inftda_g WHERE b + 1 < $batches) AS q
    JOIN system.main.range($parts) AS p(i) ON p.i // $batch = q.b
    LEFT JOIN (SELECT l.key // $part_radix AS part, system.main.list(l.key) AS k, system.main.list(l.n) AS n
               FROM inftda_k AS l JOIN (SELECT DISTINCT b + 1 AS b FROM inftda_g) AS w
               ON l.key // $batch_radix = w.b GROUP BY ALL) AS g ON g.part = p.i)

-- @part_rows_batched
FROM inftda_g AS g CROSS JOIN inftda_t AS t WHERE g.b >= 0

-- @decode_list
-- level $i's public values in code order
(SELECT system.main.list(v ORDER BY code) FROM dom$i) AS l$i

-- @decode_enum
-- level $i's ENUM values in code order (the catalog showed an ENUM when the statement was
-- generated: coded by enum_code(), no domain CTEs; ~3 ms less planning for four such columns),
-- read from the typed row, the FROM of inftda_dl
system.main.list_transform(system.main.enum_range(v$i), lambda x: system.main.cast_to_type(x, v$i)) AS l$i

-- @final_counts
-- decode to the columns' own values and types, in code order ($marker: a release that is not
-- private says so in a constant column, which CREATE TABLE AS and COPY keep)
SELECT $decoded, r.n AS "count"$marker FROM inftda_r AS r CROSS JOIN inftda_dl AS dl

-- @final_rows
SELECT $decoded_names$marker FROM (
    SELECT $decoded, system.main.unnest(system.main.range(r.n)) AS inftda_i FROM inftda_r AS r CROSS JOIN inftda_dl AS dl
)
