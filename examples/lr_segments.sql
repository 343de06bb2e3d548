-- Linear Road segment statistics in SQL: per minute and segment, the number of
-- vehicles (NOV) and their average speed (LAV's input), over the built-in LRB-shaped
-- generator (type-0 position reports).
CREATE STREAM lr WITH (source = 'generator', tuples = 200000, rate = 2000, keys = 4, seed = 7, epoch = 1);
CREATE SINK stats WITH (sink = 'stdout');
SET merge = 'transparent';

INSERT INTO stats
SELECT window_start / 60 AS minute, xway, dir, seg, count(DISTINCT vid) AS nov, avg(spd) AS lav
FROM lr
WHERE type = 0
GROUP BY TUMBLE(time, 60), xway, dir, seg;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project (window_start / 60) AS minute, xway, dir, seg, __agg0 AS nov, __agg1 AS lav
--   Aggregate window=TUMBLE(60) keys=[xway, dir, seg] aggs=[count(DISTINCT vid), avg(spd)]
--     Filter (type = 0)
--       Scan lr (type int64, time int64 EVENT TIME, vid int64, spd int64, xway int64, lane int64, dir int64, seg int64, pos int64, qid int64, sinit int64, send int64, dow int64, tod int64, day int64)
-- == optimized plan ==
-- partitioning: hash hash(xway, dir, seg) (group-by keys)
-- Project (window_start / 60) AS minute, xway, dir, seg, __agg0 AS nov, __agg1 AS lav
--   Aggregate window=TUMBLE(60) keys=[xway, dir, seg] aggs=[count(DISTINCT vid), avg(spd)]
--     Scan lr (type int64, time int64 EVENT TIME, vid int64, spd int64, xway int64, lane int64, dir int64, seg int64, pos int64, qid int64, sinit int64, send int64, dow int64, tod int64, day int64)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (minute int64?, xway int64?, dir int64?, seg int64?, nov int64?, lav float64?)
--     Map: query1 on each of 16 partitions  -> (minute int64?, xway int64?, dir int64?, seg int64?, nov int64?, lav float64?)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route hash(xway, dir, seg) when (type = 0), broadcast none, strategy autosplit
--         autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 4, 2] work 3.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--         splitters on workers 0,1; each partition merges its p inputs in serial order
--         Source: lr = generator 200000 tuples, 4 keys, 0.00% type 2, 2000 tuples/s of event time, seed 7  -> (type int64, time int64 EVENT TIME, vid int64, spd int64, xway int64, lane int64, dir int64, seg int64, pos int64, qid int64, sinit int64, send int64, dow int64, tod int64, day int64)
--           epoch 1 event-time units, physical window W = 1024 rows, as fast as possible
