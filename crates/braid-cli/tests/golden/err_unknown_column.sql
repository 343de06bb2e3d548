CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT a, b + 1 FROM s;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 2, column 11: no column `b`; columns are s.a, s.t
--   SELECT a, b + 1 FROM s;
--             ^
