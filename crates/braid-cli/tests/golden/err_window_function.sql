-- Window functions (over-aggregations) are not built yet: refused at OVER, never run as
-- a plain aggregate.
CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (path = 'calls.csv', event_time = 'start');
SELECT caller, sum(dur) OVER (PARTITION BY caller) AS total FROM calls;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: not supported: at line 4, column 25: window function `sum(...) OVER (...)` (over-aggregations)
--   SELECT caller, sum(dur) OVER (PARTITION BY caller) AS total FROM calls;
--                           ^
