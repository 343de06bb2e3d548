-- A join of two aggregates on their results (a caller and a sender with as many calls
-- as texts in the same window): the counts are known only after aggregating, so the
-- query is cut into two stages. Stage 1 computes both aggregates, each hashed by its
-- group key, and unions them into one tagged stream; stage 2 joins them, hashed by the
-- counts.
CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (path = 'calls.csv', event_time = 'start');
CREATE STREAM texts (sender BIGINT, len BIGINT, start BIGINT) WITH (path = 'texts.csv', event_time = 'start');
SET partitions = 16;
SELECT a.we, a.caller, b.sender, a.n
FROM (SELECT window_end AS we, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 60), caller) AS a
JOIN (SELECT window_end AS we, sender, count(*) AS n FROM texts GROUP BY TUMBLE(start, 60), sender) AS b
ON a.n = b.n AND b.we BETWEEN a.we AND a.we;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project a.we AS we, a.caller AS caller, b.sender AS sender, a.n AS n
--   Join right.time - left.time in [0, 0] on [a.n = b.n]
--     Project window_end AS we, caller, __agg0 AS n
--       Aggregate window=TUMBLE(60) keys=[caller] aggs=[count(*)]
--         Scan calls (caller int64?, dur int64?, start int64? EVENT TIME)
--     Project window_end AS we, sender, __agg0 AS n
--       Aggregate window=TUMBLE(60) keys=[sender] aggs=[count(*)]
--         Scan texts (sender int64?, len int64?, start int64? EVENT TIME)
-- == optimized plan ==
-- stage 1: hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (group-by keys)
-- Union all (2 inputs)
--   Project 0 AS _stream, we AS _time, we AS left.we, caller AS left.caller, n AS left.n, CAST(NULL AS int64) AS right.we, CAST(NULL AS int64) AS right.sender, CAST(NULL AS int64) AS right.n
--     Project window_end AS we, caller, __agg0 AS n
--       Aggregate window=TUMBLE(60) keys=[caller] aggs=[count(*)]
--         Scan calls (caller int64?, dur int64?, start int64? EVENT TIME)
--   Project 1 AS _stream, we AS _time, CAST(NULL AS int64) AS left.we, CAST(NULL AS int64) AS left.caller, CAST(NULL AS int64) AS left.n, we AS right.we, sender AS right.sender, n AS right.n
--     Project window_end AS we, sender, __agg0 AS n
--       Aggregate window=TUMBLE(60) keys=[sender] aggs=[count(*)]
--         Scan texts (sender int64?, len int64?, start int64? EVENT TIME)
-- stage 2: hash CASE WHEN (_stream = 0) THEN hash(left.n) WHEN (_stream = 1) THEN hash(right.n) END (equi-join keys)
-- Project a.we AS we, a.caller AS caller, b.sender AS sender, a.n AS n
--   Join right.time - left.time in [0, 0] on [a.n = b.n]
--     Scan stage1 (we int64 EVENT TIME, caller int64?, n int64?)
--     Scan stage1 (we int64 EVENT TIME, sender int64?, n int64?)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (we int64 EVENT TIME, caller int64?, sender int64?, n int64?)
--     Map: query1_2 on each of 16 partitions  -> (we int64 EVENT TIME, caller int64?, sender int64?, n int64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route CASE WHEN (_stream = 0) THEN hash(left.n) WHEN (_stream = 1) THEN hash(right.n) END, broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Merge: union  -> (_stream int64, _time int64 EVENT TIME, left.we int64?, left.caller int64?, left.n int64?, right.we int64?, right.sender int64?, right.n int64?)
--           Map: query1_1 on each of 16 partitions  -> (_stream int64, _time int64 EVENT TIME, left.we int64?, left.caller int64?, left.n int64?, right.we int64?, right.sender int64?, right.n int64?)
--             worker 0: partitions 0,2,4,6,8,10,12,14
--             worker 1: partitions 1,3,5,7,9,11,13,15
--             Split: q = 16, route CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END, broadcast none, strategy autosplit
--               autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--               shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--               Source: calls+texts = interleave of 2 source(s) in (epoch, event time, stream, source order), on worker 0  -> (_stream int64, _time int64 EVENT TIME, calls.caller int64?, calls.dur int64?, calls.start int64?, texts.sender int64?, texts.len int64?, texts.start int64?)
--                 epoch 1 event-time units, physical window W = 1024 rows, as fast as possible
--                 _stream 0: calls = csv calls.csv (header)  -> (caller int64?, dur int64?, start int64? EVENT TIME)
--                 _stream 1: texts = csv texts.csv (header)  -> (sender int64?, len int64?, start int64? EVENT TIME)
