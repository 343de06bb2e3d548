-- Quoted option values (Flink's DDL) are read as what they spell; one that spells no
-- integer is an error naming the option.
CREATE STREAM s (a BIGINT, t BIGINT) WITH ('path' = 's.csv', 'header' = 'true', 'event_time' = 't', 'epoch' = 'sixty');

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 3, column 15: option `epoch` of stream `s` must be an integer, found 'sixty'
--   CREATE STREAM s (a BIGINT, t BIGINT) WITH ('path' = 's.csv', 'header' = 'true', 'event_time' = 't', 'epoch' = 'sixty');
--                 ^
