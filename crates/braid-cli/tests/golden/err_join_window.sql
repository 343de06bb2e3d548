CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
CREATE STREAM r (a BIGINT, t BIGINT) WITH (path = 'r.csv', event_time = 't');
SELECT s.a FROM s JOIN r ON s.a = r.a;

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 3, column 29: a join of two streams needs a window: bound the time difference both ways (`b.t BETWEEN a.t - 10 AND a.t + 10`) or join count windows LAST(a, n) JOIN LAST(b, m)
--   SELECT s.a FROM s JOIN r ON s.a = r.a;
--                               ^
