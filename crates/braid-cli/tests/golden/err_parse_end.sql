-- A query cut short: the error points after its last word.
CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT a FROM s WHERE

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: parse error at line 3, column 22: Expected: an expression, found: the end of the input
--   SELECT a FROM s WHERE
--                        ^
