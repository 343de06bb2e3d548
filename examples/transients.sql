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
