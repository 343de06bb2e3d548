-- Call-record fraud detection (after StreamCloud's example): calls by subscribers on
-- a watch list, counted per hour and per call-length band.
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = 'data/calls.csv', event_time = 'start', epoch = 60, lateness = 0);
CREATE TABLE watchlist (number BIGINT, risk BIGINT) WITH (path = 'data/watchlist.csv');
CREATE SINK alerts WITH (sink = 'stdout');

INSERT INTO alerts
SELECT window_end, dur / 60 AS minutes, count(*) AS calls, sum(risk) AS risk, max(dur) AS longest
FROM calls JOIN watchlist ON calls.caller = watchlist.number
WHERE dur > 0
GROUP BY TUMBLE(start, 3600), dur / 60;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project window_end, __key0 AS minutes, __agg0 AS calls, __agg1 AS risk, __agg2 AS longest
--   Aggregate window=TUMBLE(3600) keys=[(dur / 60)] aggs=[count(*), sum(risk), max(dur)]
--     Filter (dur > 0)
--       Lookup table watchlist (50 rows) on [calls.caller = watchlist.number]
--         Scan calls (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
-- == optimized plan ==
-- stage 1: any partition (partial aggregates: each window whole on the worker that splits it; a group's partials in any partition)
-- Aggregate (partial) window=TUMBLE(3600) keys=[(dur / 60)] aggs=[count(*), sum(risk), max(dur)]
--   Lookup table watchlist (50 rows) on [calls.caller = watchlist.number]
--     Filter (dur > 0)
--       Scan calls (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
-- stage 2: hash hash(window_start, key1) (window and group-by keys of the partial aggregates)
-- Project window_end, __key0 AS minutes, __agg0 AS calls, __agg1 AS risk, __agg2 AS longest
--   Aggregate (final) window=TUMBLE(3600) keys=[key1] aggs=[count(*), sum(risk), max(dur)]
--     Scan stage1 (window_start int64, window_end int64 EVENT TIME, key1 int64?, __p0 int64?, __p1_hi int64?, __p1_lo int64?, __p2 int64?)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_end int64 EVENT TIME, minutes int64?, calls int64?, risk int64?, longest int64?)
--     Map: query1_2 on each of 16 partitions  -> (window_end int64 EVENT TIME, minutes int64?, calls int64?, risk int64?, longest int64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route hash(window_start, key1), broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Merge: union  -> (window_start int64, window_end int64 EVENT TIME, key1 int64?, __p0 int64?, __p1_hi int64?, __p1_lo int64?, __p2 int64?)
--           Map: query1_1 on each of 16 partitions  -> (window_start int64, window_end int64 EVENT TIME, key1 int64?, __p0 int64?, __p1_hi int64?, __p1_lo int64?, __p2 int64?)
--             worker 0: partitions 0,2,4,6,8,10,12,14
--             worker 1: partitions 1,3,5,7,9,11,13,15
--             Split: q = 16, route any partition (each window whole, to a partition of the worker that splits it), broadcast none, strategy autosplit
--               autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 4, 2] work 3.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--               shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--               splitters on workers 0,1; each partition merges its p inputs in serial order
--               Source: calls = csv data/calls.csv (header)  -> (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
--                 epoch 60 event-time units, physical window W = 1024 rows, as fast as possible
