#!/bin/bash
# SQL part of the recovery benchmark: examples/calls_and_texts.sql (interval join, then
# an aggregate: two stages) over 8 M calls and 4 M texts, 2 workers, CSV output.
set -e
B=${BRAID:-target/release/braid}
D=${DIR:-/tmp/braid-recovery-bench}/sql
mkdir -p $D
[ -f $D/data/calls.csv ] || $B examples-data $D/data --rows 8000000
sed -e "s|'data/|'$D/data/|g" -e "s|(sink = 'stdout')|(sink = 'csv', path = '$D/out.csv')|" examples/calls_and_texts.sql | sed '/^-- EXPECTED/,$d' > $D/q.sql
for round in 1 2 3; do
  for iv in none 1s 200ms; do
    rm -rf $D/ck
    extra=""; [ $iv != none ] && extra="--checkpoint $D/ck --checkpoint-interval $iv"
    echo "== round $round interval $iv load $(cut -d' ' -f1 /proc/loadavg)"
    $B run $D/q.sql --workers 2 $extra 2>&1 | grep -v "^$" | grep -v "late row"
    md5sum < $D/out.csv
  done
done
