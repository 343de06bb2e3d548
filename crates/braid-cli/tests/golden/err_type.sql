CREATE STREAM s (a BIGINT, name TEXT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT a FROM s WHERE name + 1 > a;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 2, column 23: `+` cannot combine string and int64
--   SELECT a FROM s WHERE name + 1 > a;
--                         ^
