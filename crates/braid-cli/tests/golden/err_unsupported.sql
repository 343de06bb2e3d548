CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT a FROM s ORDER BY a;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: not supported: at line 2, column 26: ORDER BY on a stream; `SET merge = 'transparent'` gives event-time order, and a windowed aggregate's rows sort by ORDER BY window_start or window_end first
--   SELECT a FROM s ORDER BY a;
--                            ^
