-- Two stateful operators keyed differently (StreamCloud's subquery cut): callers who
-- also sent a text to anyone within a minute of the call (an interval join keyed by the
-- subscriber), then counted per hour and call-length band (an aggregate keyed by the
-- band). Braid cuts it into two stages, each parallel with its own partitioning;
-- `SET stages = 'operator'` or `'query'` gives StreamCloud's other two strategies.
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = 'data/calls.csv', event_time = 'start', epoch = 60);
CREATE STREAM texts (sender BIGINT NOT NULL, receiver BIGINT, start BIGINT NOT NULL)
  WITH (path = 'data/texts.csv', event_time = 'start', epoch = 60);
CREATE SINK bands WITH (sink = 'stdout');

INSERT INTO bands
SELECT window_end, c.dur / 60 AS minutes, count(*) AS pairs, count(DISTINCT c.caller) AS callers
FROM calls AS c JOIN texts AS t
  ON c.caller = t.sender AND t.start BETWEEN c.start - 60 AND c.start + 60
GROUP BY TUMBLE(c.start, 3600), c.dur / 60;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project window_end, __key0 AS minutes, __agg0 AS pairs, __agg1 AS callers
--   Aggregate window=TUMBLE(3600) keys=[(c.dur / 60)] aggs=[count(*), count(DISTINCT c.caller)]
--     Join right.time - left.time in [-60, 60] on [c.caller = t.sender]
--       Scan calls (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
--       Scan texts (sender int64, receiver int64?, start int64 EVENT TIME)
-- == optimized plan ==
-- stage 1: hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (equi-join keys)
-- Join right.time - left.time in [-60, 60] on [c.caller = t.sender]
--   Scan calls (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
--   Scan texts (sender int64, receiver int64?, start int64 EVENT TIME)
-- stage 2: hash hash((dur / 60)) (group-by keys)
-- Project window_end, __key0 AS minutes, __agg0 AS pairs, __agg1 AS callers
--   Aggregate window=TUMBLE(3600) keys=[(c.dur / 60)] aggs=[count(*), count(DISTINCT c.caller)]
--     Scan stage1 (caller int64, callee int64?, start int64 EVENT TIME, dur int64?, sender int64, receiver int64?, start int64)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_end int64 EVENT TIME, minutes int64?, pairs int64?, callers int64?)
--     Map: query1_2 on each of 16 partitions  -> (window_end int64 EVENT TIME, minutes int64?, pairs int64?, callers int64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route hash((dur / 60)), broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Merge: union  -> (caller int64, callee int64?, start int64 EVENT TIME, dur int64?, sender int64, receiver int64?, start int64)
--           Map: query1_1 on each of 16 partitions  -> (caller int64, callee int64?, start int64 EVENT TIME, dur int64?, sender int64, receiver int64?, start int64)
--             worker 0: partitions 0,2,4,6,8,10,12,14
--             worker 1: partitions 1,3,5,7,9,11,13,15
--             Split: q = 16, route CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END, broadcast none, strategy autosplit
--               autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--               shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--               Source: calls+texts = interleave of 2 source(s) in (epoch, event time, stream, source order), on worker 0  -> (_stream int64, _time int64 EVENT TIME, calls.caller int64?, calls.callee int64?, calls.start int64?, calls.dur int64?, texts.sender int64?, texts.receiver int64?, texts.start int64?)
--                 epoch 60 event-time units, physical window W = 1024 rows, as fast as possible
--                 _stream 0: calls = csv data/calls.csv (header)  -> (caller int64, callee int64?, start int64 EVENT TIME, dur int64?)
--                 _stream 1: texts = csv data/texts.csv (header)  -> (sender int64, receiver int64?, start int64 EVENT TIME)
