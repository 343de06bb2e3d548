CREATE STREAM calls (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT a FROM call;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 2, column 15: no stream `call`; streams are calls
--   SELECT a FROM call;
--                 ^
