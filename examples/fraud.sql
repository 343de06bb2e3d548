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
-- partitioning: hash hash((dur / 60)) (group-by keys)
-- Project window_end, __key0 AS minutes, __agg0 AS calls, __agg1 AS risk, __agg2 AS longest
--   Aggregate window=TUMBLE(3600) keys=[(dur / 60)] aggs=[count(*), sum(risk), max(dur)]
--     Lookup table watchlist (50 rows) on [calls.caller = watchlist.number]
--       Scan calls (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_end int64 EVENT TIME, minutes int64?, calls int64?, risk int64?, longest int64?)
--     Map: query1 on each of 16 partitions  -> (window_end int64 EVENT TIME, minutes int64?, calls int64?, risk int64?, longest int64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route hash((dur / 60)) when (dur > 0), broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Source: calls = csv data/calls.csv (header)  -> (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
--           epoch 60 event-time units, physical window W = 1024 rows, as fast as possible
