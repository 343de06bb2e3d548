-- The StreamAPAS micro-benchmark: two generators, a count window of 500 tuples on
-- each, a join on value1 < value2, then a selection value1 < 50. Times are in ms; add
-- `speed = 1` to the streams to replay them in real time.
CREATE STREAM gen_1 (time BIGINT NOT NULL, value1 BIGINT)
  WITH (path = 'data/gen1.csv', event_time = 'time', epoch = 1000);
CREATE STREAM gen_2 (time BIGINT NOT NULL, value2 BIGINT)
  WITH (path = 'data/gen2.csv', event_time = 'time', epoch = 1000);
CREATE SINK joined WITH (sink = 'stdout');

INSERT INTO joined
SELECT a.time, a.value1, b.time AS time2, b.value2
FROM LAST(gen_1, 500) AS a JOIN LAST(gen_2, 500) AS b ON a.value1 < b.value2
WHERE a.value1 < 50;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project a.time AS time, a.value1 AS value1, b.time AS time2, b.value2 AS value2
--   Filter (a.value1 < 50)
--     Join last 500 x last 500 rows where (a.value1 < b.value2)
--       Scan gen_1 (time int64 EVENT TIME, value1 int64?)
--       Scan gen_2 (time int64 EVENT TIME, value2 int64?)
-- == optimized plan ==
-- partitioning: single partition: count windows (LAST) hold each stream's last rows in arrival order
-- Project a.time AS time, a.value1 AS value1, b.time AS time2, b.value2 AS value2
--   Filter (a.value1 < 50)
--     Join last 500 x last 500 rows where (a.value1 < b.value2)
--       Scan gen_1 (time int64 EVENT TIME, value1 int64?)
--       Scan gen_2 (time int64 EVENT TIME, value2 int64?)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (time int64 EVENT TIME, value1 int64?, time2 int64?, value2 int64?)
--     Map: query1 on each of 1 partitions  -> (time int64 EVENT TIME, value1 int64?, time2 int64?, value2 int64?)
--       worker 0: partitions 0
--       worker 1: partitions 
--       Split: q = 1, route 0, broadcast none, strategy fsplit
--         shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Source: gen_1+gen_2 = interleave of 2 source(s) in (epoch, event time, stream, source order), on worker 0  -> (_stream int64, _time int64 EVENT TIME, gen_1.time int64?, gen_1.value1 int64?, gen_2.time int64?, gen_2.value2 int64?)
--           epoch 1000 event-time units, physical window W = 1024 rows, as fast as possible
--           _stream 0: gen_1 = csv data/gen1.csv (header)  -> (time int64 EVENT TIME, value1 int64?)
--           _stream 1: gen_2 = csv data/gen2.csv (header)  -> (time int64 EVENT TIME, value2 int64?)
