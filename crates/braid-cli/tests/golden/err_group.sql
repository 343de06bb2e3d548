CREATE STREAM s (a BIGINT, b BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT a, b, count(*) FROM s GROUP BY TUMBLE(t, 10), a;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 2, column 11: column `b` must appear in GROUP BY or inside an aggregate
--   SELECT a, b, count(*) FROM s GROUP BY TUMBLE(t, 10), a;
--             ^
