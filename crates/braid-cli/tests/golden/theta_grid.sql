-- A join without equality keys: a 3 x 5 grid of the 16 partitions (15 used); calls
-- are dealt over grid rows, texts over grid columns, so each pair meets once.
CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (path = 'calls.csv', event_time = 'start');
CREATE STREAM texts (sender BIGINT, len BIGINT, start BIGINT) WITH (path = 'texts.csv', event_time = 'start');
SET partitions = 16;
SELECT c.caller, t.sender FROM calls AS c JOIN texts AS t ON c.dur < t.len AND t.start BETWEEN c.start - 5 AND c.start + 5;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project c.caller AS caller, t.sender AS sender
--   Join right.time - left.time in [-5, 5] where (c.dur < t.len)
--     Scan calls (caller int64?, dur int64?, start int64? EVENT TIME)
--     Scan texts (sender int64?, len int64?, start int64? EVENT TIME)
-- == optimized plan ==
-- partitioning: grid, left rows where (_stream <> 1) (a join without equality keys must meet every pair of rows: sqrt(N) x sqrt(N) grid)
-- Project c.caller AS caller, t.sender AS sender
--   Join right.time - left.time in [-5, 5] where (c.dur < t.len)
--     Scan calls (caller int64?, dur int64?, start int64? EVENT TIME)
--     Scan texts (sender int64?, len int64?, start int64? EVENT TIME)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (caller int64?, sender int64?)
--     Map: query1 on each of 15 partitions  -> (caller int64?, sender int64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13
--       Split: q = 15, route 3 x 5 grid: rows where (_stream <> 1) to grid row seq % 3, others to grid column seq % 5, broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 4.16 busiest 1.00; tree [2, 6, 2] work 4.16 busiest 1.00; parasplit p = 2 work 1.45 busiest 0.50)
--         shape: fsplit, one splitter on worker 0; est. cost 5.000 per input tuple (b = 0.2143, a = 1)
--         Source: calls+texts = interleave of 2 source(s) in (epoch, event time, stream, source order), on worker 0  -> (_stream int64, _time int64 EVENT TIME, calls.caller int64?, calls.dur int64?, calls.start int64?, texts.sender int64?, texts.len int64?, texts.start int64?)
--           epoch 1 event-time units, physical window W = 1024 rows, as fast as possible
--           _stream 0: calls = csv calls.csv (header)  -> (caller int64?, dur int64?, start int64? EVENT TIME)
--           _stream 1: texts = csv texts.csv (header)  -> (sender int64?, len int64?, start int64? EVENT TIME)
