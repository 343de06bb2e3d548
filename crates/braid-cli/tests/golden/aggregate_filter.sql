-- Aggregate FILTER: each aggregate counts only the rows its condition keeps; EXPLAIN
-- shows the condition on the aggregate. Quoted option values as Flink's DDL writes them.
CREATE STREAM calls (caller BIGINT, callee BIGINT, dur BIGINT, start BIGINT NOT NULL)
  WITH ('path' = 'calls.csv', 'header' = 'true', 'event_time' = 'start', 'epoch' = '60');
SELECT window_start, caller,
       count(*) FILTER (WHERE dur > 100) AS long_calls,
       count(*) AS calls,
       sum(dur) FILTER (WHERE callee IS NOT NULL) AS known_dur,
       count(DISTINCT callee) FILTER (WHERE dur > 100) AS long_peers
FROM calls GROUP BY TUMBLE(start, 600), caller;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project window_start, caller, __agg0 AS long_calls, __agg1 AS calls, __agg2 AS known_dur, __agg3 AS long_peers
--   Aggregate window=TUMBLE(600) keys=[caller] aggs=[count(*) FILTER (WHERE (dur > 100)), count(*), sum(dur) FILTER (WHERE (callee IS NOT NULL)), count(DISTINCT callee) FILTER (WHERE (dur > 100))]
--     Scan calls (caller int64?, callee int64?, dur int64?, start int64 EVENT TIME)
-- == optimized plan ==
-- partitioning: hash hash(caller) (group-by keys)
-- Project window_start, caller, __agg0 AS long_calls, __agg1 AS calls, __agg2 AS known_dur, __agg3 AS long_peers
--   Aggregate window=TUMBLE(600) keys=[caller] aggs=[count(*) FILTER (WHERE (dur > 100)), count(*), sum(dur) FILTER (WHERE (callee IS NOT NULL)), count(DISTINCT callee) FILTER (WHERE (dur > 100))]
--     Scan calls (caller int64?, callee int64?, dur int64?, start int64 EVENT TIME)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_start int64?, caller int64?, long_calls int64?, calls int64?, known_dur int64?, long_peers int64?)
--     Map: query1 on each of 16 partitions  -> (window_start int64?, caller int64?, long_calls int64?, calls int64?, known_dur int64?, long_peers int64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route hash(caller), broadcast none, strategy autosplit
--         autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 4, 2] work 3.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--         splitters on workers 0,1; each partition merges its p inputs in serial order
--         Source: calls = csv calls.csv (header)  -> (caller int64?, callee int64?, dur int64?, start int64 EVENT TIME)
--           epoch 60 event-time units, physical window W = 1024 rows, as fast as possible
