-- LATE names a sink whose query cannot refuse a row (no time window, no stream join).
CREATE STREAM calls (caller BIGINT, start BIGINT NOT NULL) WITH (path = 'c.csv', event_time = 'start');
CREATE SINK counts WITH (sink = 'stdout');
INSERT INTO counts SELECT caller, count(*) AS n FROM calls GROUP BY caller;
SELECT * FROM LATE(counts);

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 5, column 15: LATE(counts): no earlier query writing to sink `counts` can refuse a row as late (only time windows and stream joins do)
--   SELECT * FROM LATE(counts);
--                 ^
