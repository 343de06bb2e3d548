-- Filters move towards the scan: conditions on stream columns go below the projection
-- and the table lookup, then into the balancer; conditions on table columns stay.
CREATE STREAM calls (caller BIGINT, start BIGINT NOT NULL, dur BIGINT) WITH (path = 'c.csv', event_time = 'start');
CREATE TABLE watch (number BIGINT, risk BIGINT) WITH (path = 'watch.csv');
SELECT window_end, minutes, count(*) AS n
FROM (SELECT start, dur / 60 AS minutes, risk FROM calls JOIN watch ON calls.caller = watch.number) AS x
WHERE minutes > 1 AND risk > 1
GROUP BY TUMBLE(start, 60), minutes;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project window_end, minutes, __agg0 AS n
--   Aggregate window=TUMBLE(60) keys=[minutes] aggs=[count(*)]
--     Filter ((minutes > 1) AND (risk > 1))
--       Project start, (dur / 60) AS minutes, risk
--         Lookup table watch (1 rows) on [calls.caller = watch.number]
--           Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
-- == optimized plan ==
-- stage 1: any partition (partial aggregates: each window whole on the worker that splits it; a group's partials in any partition)
-- Aggregate (partial) window=TUMBLE(60) keys=[minutes] aggs=[count(*)]
--   Project start, (dur / 60) AS minutes, risk
--     Filter (risk > 1)
--       Lookup table watch (1 rows) on [calls.caller = watch.number]
--         Filter ((dur / 60) > 1)
--           Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
-- stage 2: hash hash(window_start, minutes) (window and group-by keys of the partial aggregates)
-- Project window_end, minutes, __agg0 AS n
--   Aggregate (final) window=TUMBLE(60) keys=[minutes] aggs=[count(*)]
--     Scan stage1 (window_start int64, window_end int64 EVENT TIME, minutes int64?, __p0 int64?)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--     Map: query1_2 on each of 16 partitions  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route hash(window_start, minutes), broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Merge: union  -> (window_start int64, window_end int64 EVENT TIME, minutes int64?, __p0 int64?)
--           Map: query1_1 on each of 16 partitions  -> (window_start int64, window_end int64 EVENT TIME, minutes int64?, __p0 int64?)
--             worker 0: partitions 0,2,4,6,8,10,12,14
--             worker 1: partitions 1,3,5,7,9,11,13,15
--             Split: q = 16, route any partition (each window whole, to a partition of the worker that splits it), broadcast none, strategy autosplit
--               autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 4, 2] work 3.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--               shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--               splitters on workers 0,1; each partition merges its p inputs in serial order
--               Source: calls = csv c.csv (header)  -> (caller int64?, start int64 EVENT TIME, dur int64?)
--                 epoch 1 event-time units, physical window W = 1024 rows, as fast as possible
