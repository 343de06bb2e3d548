-- Two stateful operators keyed differently: an interval join on the caller, then an
-- aggregate on the call length. Subquery cut (the default) gives two stages; operator
-- cut one stage per operator; query cut one stage in one partition.
CREATE STREAM calls (caller BIGINT, start BIGINT NOT NULL, dur BIGINT) WITH (path = 'c.csv', event_time = 'start', epoch = 10);
CREATE STREAM texts (sender BIGINT, start BIGINT NOT NULL) WITH (path = 't.csv', event_time = 'start', epoch = 10);
SET partitions = 4;
SELECT window_end, dur / 60 AS minutes, count(*) AS n
FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 5
GROUP BY TUMBLE(c.start, 100), dur / 60;
SET stages = 'operator';
SELECT window_end, dur / 60 AS minutes, count(*) AS n FROM calls WHERE dur > 0 GROUP BY TUMBLE(start, 100), dur / 60;
SET stages = 'query';
SELECT window_end, dur / 60 AS minutes, count(*) AS n
FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 5
GROUP BY TUMBLE(c.start, 100), dur / 60;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project window_end, __key0 AS minutes, __agg0 AS n
--   Aggregate window=TUMBLE(100) keys=[(dur / 60)] aggs=[count(*)]
--     Join right.time - left.time in [-5, 5] on [c.caller = t.sender]
--       Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
--       Scan texts (sender int64?, start int64 EVENT TIME)
-- == optimized plan ==
-- stage 1: hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (equi-join keys)
-- Join right.time - left.time in [-5, 5] on [c.caller = t.sender]
--   Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
--   Scan texts (sender int64?, start int64 EVENT TIME)
-- stage 2: hash hash((dur / 60)) (group-by keys)
-- Project window_end, __key0 AS minutes, __agg0 AS n
--   Aggregate window=TUMBLE(100) keys=[(dur / 60)] aggs=[count(*)]
--     Scan stage1 (caller int64?, start int64 EVENT TIME, dur int64?, sender int64?, start int64)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--     Map: query1_2 on each of 4 partitions  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--       worker 0: partitions 0,2
--       worker 1: partitions 1,3
--       Split: q = 4, route hash((dur / 60)), broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 2] work 2.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Merge: union  -> (caller int64?, start int64 EVENT TIME, dur int64?, sender int64?, start int64)
--           Map: query1_1 on each of 4 partitions  -> (caller int64?, start int64 EVENT TIME, dur int64?, sender int64?, start int64)
--             worker 0: partitions 0,2
--             worker 1: partitions 1,3
--             Split: q = 4, route CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END, broadcast none, strategy autosplit
--               autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 2] work 2.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--               shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--               Source: calls+texts = interleave of 2 source(s) in (epoch, event time, stream, source order), on worker 0  -> (_stream int64, _time int64 EVENT TIME, calls.caller int64?, calls.start int64?, calls.dur int64?, texts.sender int64?, texts.start int64?)
--                 epoch 10 event-time units, physical window W = 1024 rows, as fast as possible
--                 _stream 0: calls = csv c.csv (header)  -> (caller int64?, start int64 EVENT TIME, dur int64?)
--                 _stream 1: texts = csv t.csv (header)  -> (sender int64?, start int64 EVENT TIME)
-- query 2
-- == logical plan ==
-- Project window_end, __key0 AS minutes, __agg0 AS n
--   Aggregate window=TUMBLE(100) keys=[(dur / 60)] aggs=[count(*)]
--     Filter (dur > 0)
--       Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
-- == optimized plan ==
-- stage 1: any partition (no operator keeps state: each window whole on the worker that splits it)
-- Filter (dur > 0)
--   Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
-- stage 2: hash hash((dur / 60)) (group-by keys)
-- Aggregate window=TUMBLE(100) keys=[(dur / 60)] aggs=[count(*)]
--   Scan stage1 (caller int64?, start int64 EVENT TIME, dur int64?)
-- stage 3: any partition (no operator keeps state: each window whole on the worker that splits it)
-- Project window_end, __key0 AS minutes, __agg0 AS n
--   Scan stage2 (window_start int64, window_end int64 EVENT TIME, key1 int64?, __agg0 int64?)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--     Map: query2_3 on each of 4 partitions  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--       worker 0: partitions 0,2
--       worker 1: partitions 1,3
--       Split: q = 4, route any partition (each window whole, to a partition of the worker that splits it), broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 2] work 2.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Merge: union  -> (window_start int64, window_end int64 EVENT TIME, key1 int64?, __agg0 int64?)
--           Map: query2_2 on each of 4 partitions  -> (window_start int64, window_end int64 EVENT TIME, key1 int64?, __agg0 int64?)
--             worker 0: partitions 0,2
--             worker 1: partitions 1,3
--             Split: q = 4, route hash((dur / 60)), broadcast none, strategy autosplit
--               autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 2] work 2.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--               shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--               Merge: union  -> (caller int64?, start int64 EVENT TIME, dur int64?)
--                 Map: query2_1 on each of 4 partitions  -> (caller int64?, start int64 EVENT TIME, dur int64?)
--                   worker 0: partitions 0,2
--                   worker 1: partitions 1,3
--                   Split: q = 4, route any partition (each window whole, to a partition of the worker that splits it), broadcast none, strategy autosplit
--                     autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 2] work 2.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--                     shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--                     splitters on workers 0,1; each partition merges its p inputs in serial order
--                     Source: calls = csv c.csv (header)  -> (caller int64?, start int64 EVENT TIME, dur int64?)
--                       epoch 10 event-time units, physical window W = 1024 rows, as fast as possible
-- query 3
-- == logical plan ==
-- Project window_end, __key0 AS minutes, __agg0 AS n
--   Aggregate window=TUMBLE(100) keys=[(dur / 60)] aggs=[count(*)]
--     Join right.time - left.time in [-5, 5] on [c.caller = t.sender]
--       Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
--       Scan texts (sender int64?, start int64 EVENT TIME)
-- == optimized plan ==
-- partitioning: single partition: 2 stateful operators need different partitionings
-- Project window_end, __key0 AS minutes, __agg0 AS n
--   Aggregate window=TUMBLE(100) keys=[(dur / 60)] aggs=[count(*)]
--     Join right.time - left.time in [-5, 5] on [c.caller = t.sender]
--       Scan calls (caller int64?, start int64 EVENT TIME, dur int64?)
--       Scan texts (sender int64?, start int64 EVENT TIME)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--     Map: query3 on each of 1 partitions  -> (window_end int64 EVENT TIME, minutes int64?, n int64?)
--       worker 0: partitions 0
--       worker 1: partitions 
--       Split: q = 1, route 0, broadcast none, strategy fsplit
--         shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Source: calls+texts = interleave of 2 source(s) in (epoch, event time, stream, source order), on worker 0  -> (_stream int64, _time int64 EVENT TIME, calls.caller int64?, calls.start int64?, calls.dur int64?, texts.sender int64?, texts.start int64?)
--           epoch 10 event-time units, physical window W = 1024 rows, as fast as possible
--           _stream 0: calls = csv c.csv (header)  -> (caller int64?, start int64 EVENT TIME, dur int64?)
--           _stream 1: texts = csv t.csv (header)  -> (sender int64?, start int64 EVENT TIME)
