-- A radix-2 FFT-shaped topology: split the samples into even and odd indexes, compute
-- each half's contribution to DFT bin 1 over windows of 8 samples, and combine the
-- halves (X = E + O) in a keyed merge, the butterfly.
CREATE STREAM samples (idx BIGINT NOT NULL, t BIGINT NOT NULL, x DOUBLE)
  WITH (path = 'data/samples.csv', event_time = 't', epoch = 1024);
CREATE SINK bins WITH (sink = 'stdout');

INSERT INTO bins
SELECT * FROM PARALLEL(samples,
  partitions => 2,
  route => idx % 2,
  apply => (SELECT window_start,
                   sum(x * CASE idx % 8 WHEN 0 THEN 1.0 WHEN 1 THEN 0.7071 WHEN 2 THEN 0.0
                                        WHEN 3 THEN -0.7071 WHEN 4 THEN -1.0 WHEN 5 THEN -0.7071
                                        WHEN 6 THEN 0.0 ELSE 0.7071 END) AS re,
                   sum(x * CASE idx % 8 WHEN 0 THEN 0.0 WHEN 1 THEN -0.7071 WHEN 2 THEN -1.0
                                        WHEN 3 THEN -0.7071 WHEN 4 THEN 0.0 WHEN 5 THEN 0.7071
                                        WHEN 6 THEN 1.0 ELSE 0.7071 END) AS im
            FROM samples GROUP BY TUMBLE(t, 8)),
  merge => 'keyed', merge_key => window_start, combine => (sum(re), sum(im)));

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project window_start, __agg0 AS re, __agg1 AS im
--   Aggregate window=TUMBLE(8) keys=[] aggs=[sum((x * CASE WHEN ((idx % 8) = 0) THEN 1.0 WHEN ((idx % 8) = 1) THEN 0.7071 WHEN ((idx % 8) = 2) THEN 0.0 WHEN ((idx % 8) = 3) THEN -0.7071 WHEN ((idx % 8) = 4) THEN -1.0 WHEN ((idx % 8) = 5) THEN -0.7071 WHEN ((idx % 8) = 6) THEN 0.0 ELSE 0.7071 END)), sum((x * CASE WHEN ((idx % 8) = 0) THEN 0.0 WHEN ((idx % 8) = 1) THEN -0.7071 WHEN ((idx % 8) = 2) THEN -1.0 WHEN ((idx % 8) = 3) THEN -0.7071 WHEN ((idx % 8) = 4) THEN 0.0 WHEN ((idx % 8) = 5) THEN 0.7071 WHEN ((idx % 8) = 6) THEN 1.0 ELSE 0.7071 END))]
--     Scan samples (idx int64, t int64 EVENT TIME, x float64?)
-- == optimized plan ==
-- partitioning: explicit (PARALLEL)
-- == physical plan ==
-- Sink: Stdout
--   Merge: keyed on columns [0], aggregates [Sum(1), Sum(2)], pre-combined per worker, then by key  -> (window_start int64?, sum_re float64, sum_im float64)
--     Map: query1 on each of 2 partitions  -> (window_start int64?, re float64?, im float64?)
--       worker 0: partitions 0
--       worker 1: partitions 1
--       Split: q = 2, route (idx % 2), broadcast none, strategy autosplit
--         autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--         splitters on workers 0,1; each partition merges its p inputs in serial order
--         Source: samples = csv data/samples.csv (header)  -> (idx int64, t int64 EVENT TIME, x float64?)
--           epoch 1024 event-time units, physical window W = 1024 rows, as fast as possible
