#!/bin/bash
# Recovery benchmark: Linear Road (8 expressways, 30 simulated minutes, steady) through
# braid run with a CSV sink, 2 workers, max speed; checkpoints none / 10 s / 1 s.
set -e
mkdir -p "${DIR:-/tmp/braid-recovery-bench}"
B=${BRAID:-target/release/braid}
D=${DIR:-/tmp/braid-recovery-bench}
[ -f $D/lrb/input.csv ] || $B lrb generate --xways 8 --minutes 30 --profile steady --out $D/lrb
sed -e "s|lrb/input.csv|$D/lrb/input.csv|" -e "s|(sink = 'native', name = 'lr_output')|(sink = 'csv', path = '$D/out.csv')|" examples/linear_road.sql | sed '/^-- EXPECTED/,$d' > $D/lr.sql
for round in 1 2 3; do
  for iv in none 10s 1s; do
    rm -rf $D/ck
    extra=""; [ $iv != none ] && extra="--checkpoint $D/ck --checkpoint-interval $iv"
    echo "== round $round interval $iv load $(cut -d' ' -f1 /proc/loadavg)"
    /usr/bin/time -f "wall %e s, user %U s, sys %S s, maxrss %M KB" $B run $D/lr.sql --lrb-history $D/lrb --workers 2 $extra 2>&1 | grep -v "^$"
    sort $D/out.csv | md5sum
  done
done
