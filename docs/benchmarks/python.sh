#!/bin/bash
# A Python scalar function's cost per row: the same query over N rows (default
# 1,000,000) with `x * 3 + y` written in SQL (Braid's evaluation, what a Rust function
# costs) and as `CREATE FUNCTION f(x BIGINT, y BIGINT) RETURNS BIGINT LANGUAGE python`,
# on 1 and 2 workers, 3 rounds alternating; the output of both is checked equal.
# Run from the repository root after `cargo build --release -p braid-cli`.
set -e
B=${BRAID:-target/release/braid}
D=${DIR:-/tmp/braid-python-bench}
N=${ROWS:-1000000}
rm -rf $D; mkdir -p $D
awk -v n=$N 'BEGIN { srand(7); print "k,x,y"; for (i = 0; i < n; i++) printf "%d,%d,%d\n", int(rand() * 100), int(rand() * 100000), int(rand() * 1000) }' > $D/rows.csv
head="CREATE STREAM rows (k BIGINT, x BIGINT, y BIGINT) WITH (path = '$D/rows.csv');
CREATE FUNCTION f(x BIGINT, y BIGINT) RETURNS BIGINT LANGUAGE python AS \$\$ return x * 3 + y \$\$;
CREATE SINK out WITH (sink = 'csv', path = '$D/out.csv');"
printf "%s\nINSERT INTO out SELECT k, sum(x * 3 + y) AS s FROM rows GROUP BY k;\n" "$head" > $D/sql.sql
printf "%s\nINSERT INTO out SELECT k, sum(f(x, y)) AS s FROM rows GROUP BY k;\n" "$head" > $D/python.sql
for round in 1 2 3; do
  for w in 1 2; do
    for s in sql python; do
      echo "== round $round $s workers $w load $(cut -d' ' -f1 /proc/loadavg)"
      /usr/bin/time -f "wall %e s, user %U s, sys %S s, maxrss %M KB" $B run $D/$s.sql --workers $w 2>&1 | grep -v "^braid:"
      sort $D/out.csv | md5sum
    done
  done
done
