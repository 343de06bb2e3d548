CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT a,, t FROM s;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: parse error at line 2, column 10: Expected: an expression, found: ,
--   SELECT a,, t FROM s;
--            ^
