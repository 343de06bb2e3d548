-- Exact decimals are not built yet: a DECIMAL column is refused, not stored as a float.
CREATE STREAM payments (id BIGINT, amount DECIMAL(10,2), t BIGINT) WITH (path = 'p.csv', event_time = 't');

-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)
-- error: not supported: at line 2, column 36: column `amount` of type DECIMAL(10,2) (exact decimals); write DOUBLE for an approximate number or BIGINT for a whole number (of cents, say)
--   CREATE STREAM payments (id BIGINT, amount DECIMAL(10,2), t BIGINT) WITH (path = 'p.csv', event_time = 't');
--                                      ^
