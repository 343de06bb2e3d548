-- Map-reduce grep over many files: each log file is routed whole to one partition
-- (by its file number `_stream`), each partition counts the lines per level it
-- matches (map), and a keyed merge adds the partial counts (reduce).
CREATE STREAM logs (line TEXT) WITH (path = 'data/logs/*.log', header = false);
CREATE SINK counts WITH (sink = 'stdout');

INSERT INTO counts
SELECT * FROM PARALLEL(logs,
  partitions => 4,
  route => _stream,
  strategy => 'fsplit',
  apply => (SELECT CASE WHEN line LIKE '% ERROR %' THEN 2 ELSE 1 END AS level, count(*) AS n
            FROM logs
            WHERE line LIKE '% ERROR %' OR line LIKE '% WARN %'
            GROUP BY CASE WHEN line LIKE '% ERROR %' THEN 2 ELSE 1 END),
  merge => 'keyed', merge_key => level, combine => sum(n));

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project __key0 AS level, __agg0 AS n
--   Aggregate window=UNBOUNDED keys=[CASE WHEN like(line, '% ERROR %') THEN 2 ELSE 1 END] aggs=[count(*)]
--     Filter (like(line, '% ERROR %') OR like(line, '% WARN %'))
--       Scan logs (line string?)
-- == optimized plan ==
-- partitioning: explicit (PARALLEL)
-- == physical plan ==
-- Sink: Stdout
--   Merge: keyed on columns [0], aggregates [Sum(1)], pre-combined per worker, then by key  -> (level int64?, sum_n int64)
--     Map: query1 on each of 4 partitions  -> (level int64?, n int64?)
--       worker 0: partitions 0,2
--       worker 1: partitions 1,3
--       Split: q = 4, route _stream, broadcast none, strategy fsplit
--         shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Source: logs = interleave of 4 source(s) in (epoch, stream, source order), rows numbered by file, file k read whole on worker k mod 2  -> (_stream int64, _time int64 EVENT TIME, line string?)
--           epoch 1024 event-time units, physical window W = 1024 rows, as fast as possible
--           _stream 0: logs0 = csv data/logs/part-0.log  -> (line string?)
--           _stream 1: logs1 = csv data/logs/part-1.log  -> (line string?)
--           _stream 2: logs2 = csv data/logs/part-2.log  -> (line string?)
--           _stream 3: logs3 = csv data/logs/part-3.log  -> (line string?)
