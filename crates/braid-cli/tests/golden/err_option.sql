CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_tme = 't');

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: plan error: at line 1, column 15: unknown option `event_tme` for stream `s`; options are source, connector, path, event_time, window, time_unit, epoch, lateness, speed, units_per_second, header, format, paths
--   CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_tme = 't');
--                 ^
