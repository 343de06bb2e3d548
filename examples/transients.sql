-- Transient detection over many receivers (thesis Papers II and VI, LOFAR): each row
-- is one receiver's vector of samples at one time step. The power spectrum of every
-- vector is computed (fft, then re^2 + im^2 per bin), and a vector whose strongest
-- bin (DC left out) holds over 20 times the mean power is reported with its receiver,
-- time and bin. Parallelized by receiver: a receiver's vectors stay on one partition.
--
-- Make the signals first (16 receivers x 64 steps of 1,024 samples, noise with 1%
-- of vectors carrying a sinusoid):
--   braid lofar generate --out examples/data/signals.csv
CREATE STREAM signals (receiver BIGINT NOT NULL, t BIGINT NOT NULL,
                       x DOUBLE PRECISION[] NOT NULL)
  WITH (path = 'data/signals.csv', header = true, event_time = 't', epoch = 1);
CREATE SINK transients WITH (sink = 'stdout');

INSERT INTO transients
SELECT * FROM PARALLEL(signals,
  partitions => 8,
  route => receiver,
  apply => (SELECT receiver, t, array_argmax(p) AS bin, array_max(p) / array_avg(p) AS ratio
            FROM (SELECT receiver, t, power_spectrum(fft(x))[2:cardinality(x) / 2] AS p
                  FROM signals) AS s
            WHERE array_max(p) > 20 * array_avg(p)),
  merge => 'time');

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- query 1
-- == logical plan ==
-- Project receiver, t, array_argmax(p) AS bin, (array_max(p) / array_avg(p)) AS ratio
--   Filter (array_max(p) > (20 * array_avg(p)))
--     Project receiver, t, array_slice(power_spectrum(fft(x)), 2, (cardinality(x) / 2)) AS p
--       Scan signals (receiver int64, t int64 EVENT TIME, x float64[])
-- == optimized plan ==
-- partitioning: explicit (PARALLEL)
-- == physical plan ==
-- Sink: Stdout
--   Merge: time-ordered (serial order, on worker 0)  -> (receiver int64?, t int64 EVENT TIME, bin int64?, ratio float64?)
--     Map: query1 on each of 8 partitions  -> (receiver int64?, t int64 EVENT TIME, bin int64?, ratio float64?)
--       worker 0: partitions 0,2,4,6
--       worker 1: partitions 1,3,5,7
--       Split: q = 8, route receiver, broadcast none, strategy autosplit
--         autosplit chose parasplit p = 2 (no desired rate: the least work; per row, in one splitter's work: fsplit work 1.62 busiest 1.62; tree [2, 4] work 2.62 busiest 1.62; parasplit p = 2 work 1.50 busiest 0.50)
--         shape: parasplit, p = 2 window splitters, one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)
--         splitters on workers 0,1; each partition merges its p inputs in serial order
--         Source: signals = csv data/signals.csv (header)  -> (receiver int64, t int64 EVENT TIME, x float64[])
--           epoch 1 event-time units, physical window W = 1024 rows, as fast as possible
