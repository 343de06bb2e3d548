-- The parallel Linear Road plan as one query text: position reports routed by
-- expressway, balance requests (type 2, no expressway) broadcast to every partition,
-- the Linear Road stream function on each partition, notifications merged by union
-- and partial balances combined by key. It needs Linear Road's functions registered
-- (the `linear_road` stream function, the `lr_balance` combiner and the `lr_output`
-- sink): with data from `braid lrb generate -o DIR/lrb`, next to a copy of this file,
--   braid run DIR/linear_road.sql --workers 2 --lrb-history DIR/lrb --lrb-output DIR/out.csv
-- and check the answers with `braid lrb validate`. The test
-- `linear_road_is_one_query_text` does the same.
CREATE STREAM lrb (type BIGINT NOT NULL, time BIGINT NOT NULL, vid BIGINT NOT NULL,
                   spd BIGINT NOT NULL, xway BIGINT NOT NULL, lane BIGINT NOT NULL,
                   dir BIGINT NOT NULL, seg BIGINT NOT NULL, pos BIGINT NOT NULL,
                   qid BIGINT NOT NULL, sinit BIGINT NOT NULL, send BIGINT NOT NULL,
                   dow BIGINT NOT NULL, tod BIGINT NOT NULL, day BIGINT NOT NULL)
  WITH (path = 'lrb/input.csv', header = false, event_time = 'time', epoch = 1, window = 256);
CREATE SINK answers WITH (sink = 'native', name = 'lr_output');

INSERT INTO answers
SELECT * FROM PARALLEL(lrb,
  partitions => 8,
  route => xway, route_when => type <> 2,
  broadcast => type = 2,
  strategy => 'autosplit',
  apply => linear_road,
  merge => 'keyed', merge_key => (type, time, vid, qid),
  combine => lr_balance, merge_filter => type = 2);

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- (explicit PARALLEL: the physical plan is as written)
-- == optimized plan ==
-- partitioning: explicit (PARALLEL)
-- == physical plan ==
-- Sink: Native("lr_output")
--   Merge: keyed on columns [0, 1, 2, 3] where (type = 2) (other rows: union), combiner `lr_balance`, pre-combined per worker, then by key  -> (type int64, time int64, vid int64, qid int64, a int64, b int64, c int64)
--     Map: linear_road on each of 8 partitions  -> (type int64, time int64, vid int64, qid int64, a int64, b int64, c int64)
--       worker 0: partitions 0,2,4,6
--       worker 1: partitions 1,3,5,7
--       Split: q = 8, route xway when (type <> 2), broadcast (type = 2), strategy autosplit
--         autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 4] work 2.63 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--         splitters on workers 0,1; each partition merges its p inputs in serial order
--         Source: lrb = csv lrb/input.csv  -> (type int64, time int64 EVENT TIME, vid int64, spd int64, xway int64, lane int64, dir int64, seg int64, pos int64, qid int64, sinit int64, send int64, dow int64, tod int64, day int64)
--           epoch 1 event-time units, physical window W = 256 rows, as fast as possible
