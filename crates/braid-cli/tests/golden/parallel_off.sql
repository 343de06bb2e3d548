-- Automatic parallelization switched off: one partition, filter in the balancer.
CREATE STREAM s (k BIGINT, v DOUBLE, t BIGINT NOT NULL) WITH (path = 's.csv', event_time = 't', epoch = 10);
SET parallel = 'off';
SELECT k, v * 2 AS w FROM s WHERE v > 0.5;
SET parallel = 'auto';
SET merge = 'best_effort';
SET partitions = 4;
SELECT window_start, k, avg(v) AS mean FROM s WHERE k IN (1, 2, 3) GROUP BY HOP(t, 50, 100), k;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project k, (v * 2) AS w
--   Filter (v > 0.5)
--     Scan s (k int64?, v float64?, t int64 EVENT TIME)
-- == optimized plan ==
-- partitioning: single partition: SET parallel = 'off'
-- Project k, (v * 2) AS w
--   Scan s (k int64?, v float64?, t int64 EVENT TIME)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (k int64?, w float64?)
--     Map: query1 on each of 1 partitions  -> (k int64?, w float64?)
--       worker 0: partitions 0
--       worker 1: partitions 
--       Split: q = 1, route 0 when (v > 0.5), broadcast none, strategy fsplit
--         shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Source: s = csv s.csv (header)  -> (k int64?, v float64?, t int64 EVENT TIME)
--           epoch 10 event-time units, physical window W = 1024 rows, as fast as possible
-- query 2
-- == logical plan ==
-- Project window_start, k, __agg0 AS mean
--   Aggregate window=HOP(slide 50, size 100) keys=[k] aggs=[avg(v)]
--     Filter (((k = 1) OR (k = 2)) OR (k = 3))
--       Scan s (k int64?, v float64?, t int64 EVENT TIME)
-- == optimized plan ==
-- partitioning: hash hash(k) (group-by keys)
-- Project window_start, k, __agg0 AS mean
--   Aggregate window=HOP(slide 50, size 100) keys=[k] aggs=[avg(v)]
--     Scan s (k int64?, v float64?, t int64 EVENT TIME)
-- == physical plan ==
-- Sink: Stdout
--   Merge: union  -> (window_start int64?, k int64?, mean float64?)
--     Map: query2 on each of 4 partitions  -> (window_start int64?, k int64?, mean float64?)
--       worker 0: partitions 0,2
--       worker 1: partitions 1,3
--       Split: q = 4, route hash(k) when (((k = 1) OR (k = 2)) OR (k = 3)), broadcast none, strategy autosplit
--         autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 2] work 2.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--         splitters on workers 0,1; each partition merges its p inputs in serial order
--         Source: s = csv s.csv (header)  -> (k int64?, v float64?, t int64 EVENT TIME)
--           epoch 10 event-time units, physical window W = 1024 rows, as fast as possible
