-- Trip grouping (thesis Paper III): online ride sharing over a day of trip requests.
-- Every minute, TG groups the requests about to expire with their nearest waiting
-- ones (up to 4 a vehicle, at least 20% saved). The requests are split 16 ways by
-- adaptive KD partitioning (`akd`: cuts learned again every 10 minutes from the last
-- 10 minutes, a request never moved once assigned), so nearby requests meet on one
-- partition; the shares come out in time order, a row per member:
-- (t, leader, id, size, cost, alone).
--
-- Make the requests first (251,000 in a generated city, deterministic per seed):
--   braid trips generate --out examples/data/trips.csv
-- Static partitioners learn from another day: braid trips generate --seed 2 --out h.csv,
-- then `braid run --trips-history h.csv` and route => spq(ox, oy, dx, dy) or skd(...).
CREATE STREAM requests (id BIGINT NOT NULL, t BIGINT NOT NULL,
                        ox BIGINT NOT NULL, oy BIGINT NOT NULL,
                        dx BIGINT NOT NULL, dy BIGINT NOT NULL,
                        deadline BIGINT NOT NULL)
  WITH (path = 'data/trips.csv', header = true, event_time = 't', epoch = 60);
CREATE SINK shares WITH (sink = 'stdout');

INSERT INTO shares
SELECT * FROM PARALLEL(requests,
  partitions => 16,
  route => akd(t, ox, oy, dx, dy),
  apply => tg,
  merge => 'time');

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- (explicit PARALLEL: the physical plan is as written)
-- == optimized plan ==
-- partitioning: explicit (PARALLEL)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (t int64, leader int64, id int64, size int64, cost float64, alone float64)
--     Map: tg on each of 16 partitions  -> (t int64, leader int64, id int64, size int64, cost float64, alone float64)
--       worker 0: partitions 0,2,4,6,8,10,12,14
--       worker 1: partitions 1,3,5,7,9,11,13,15
--       Split: q = 16, route _part, broadcast none, strategy autosplit
--         autosplit chose fsplit (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.00 busiest 1.00; tree [2, 4, 2] work 3.00 busiest 1.00; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: fsplit, one splitter on each worker, where the earlier stage's rows are; est. cost 2.000 per input tuple (b = 0, a = 1)
--         Merge: union  -> (id int64, t int64 EVENT TIME, ox int64, oy int64, dx int64, dy int64, deadline int64, _part int64)
--           Map: akd_assign1 on each of 1 partitions  -> (id int64, t int64 EVENT TIME, ox int64, oy int64, dx int64, dy int64, deadline int64, _part int64)
--             worker 0: partitions 0
--             worker 1: partitions 
--             Split: q = 1, route round robin, broadcast none, strategy fsplit
--               shape: fsplit, one splitter on worker 0; est. cost 2.000 per input tuple (b = 0, a = 1)
--               Source: requests = csv data/trips.csv (header)  -> (id int64, t int64 EVENT TIME, ox int64, oy int64, dx int64, dy int64, deadline int64)
--                 epoch 60 event-time units, physical window W = 1024 rows, as fast as possible
