-- HOP(time, slide, size), Flink's order: a slide larger than the size leaves gaps.
CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't');
SELECT window_end, count(*) AS n FROM s GROUP BY HOP(t, 60, 20);

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 3, column 50: HOP's slide 60 is larger than its size 20: the windows would leave gaps, and rows in them would count as late; write HOP(time, slide, size) with slide <= size
--   SELECT window_end, count(*) AS n FROM s GROUP BY HOP(t, 60, 20);
--                                                    ^
