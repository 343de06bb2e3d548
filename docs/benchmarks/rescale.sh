#!/bin/bash
# Live-rescale benchmark: requests sent to a running `braid run` through its dashboard
# (POST /api/rescale), and the pause each cost, as the run reports it.
# - SQL: examples/calls_and_texts.sql (two stages) over 8 M calls and 4 M texts, 2
#   workers: alternately 16 and 8 partitions per stage every 0.4 s; a run without
#   rescales for the time and the output's md5.
# - Linear Road: 8 expressways, 30 simulated minutes (about 30 MB of state), 2 workers:
#   a partition moved between the workers every second (the whole state written and
#   read back each time).
set -e
B=${BRAID:-target/release/braid}
D=${DIR:-/tmp/braid-recovery-bench}
mkdir -p $D/sql
[ -f $D/sql/data/calls.csv ] || $B examples-data $D/sql/data --rows 8000000
sed -e "s|'data/|'$D/sql/data/|g" -e "s|(sink = 'stdout')|(sink = 'csv', path = '$D/sql/out.csv')|" examples/calls_and_texts.sql | sed '/^-- EXPECTED/,$d' > $D/sql/q.sql
[ -f $D/lrb/input.csv ] || $B lrb generate --xways 8 --minutes 30 --profile steady --out $D/lrb
sed -e "s|lrb/input.csv|$D/lrb/input.csv|" -e "s|(sink = 'native', name = 'lr_output')|(sink = 'csv', path = '$D/out.csv')|" examples/linear_road.sql | sed '/^-- EXPECTED/,$d' > $D/lr.sql
PORT=${PORT:-6891}
# ask EVERY REQUEST...: posts the requests in turn, every EVERY seconds, while the run is up.
ask() {
  local every=$1; shift
  sleep 0.3
  while kill -0 $RUN 2>/dev/null; do
    for r in "$@"; do
      sleep $every
      curl -s -X POST "127.0.0.1:$PORT/api/rescale?$r" >/dev/null || true
    done
  done
}
for round in 1 2 3; do
  echo "== round $round sql, no rescale, load $(cut -d' ' -f1 /proc/loadavg)"
  $B run $D/sql/q.sql --workers 2 2>&1 | grep "rows in"
  md5sum < $D/sql/out.csv
  echo "== round $round sql, rescaled every 0.4 s, load $(cut -d' ' -f1 /proc/loadavg)"
  $B run $D/sql/q.sql --workers 2 --dashboard 127.0.0.1:$PORT 2>$D/err.txt & RUN=$!
  ask 0.4 partitions=16 partitions=8
  wait $RUN || true
  grep "rows in" $D/err.txt || cat $D/err.txt
  grep -c "rescaled live" $D/err.txt || true
  grep -o "paused [0-9.]* ms" $D/err.txt | tr '\n' ' '; echo
  md5sum < $D/sql/out.csv
  echo "== round $round linear road, a partition moved every 1 s, load $(cut -d' ' -f1 /proc/loadavg)"
  rm -rf $D/ck
  $B run $D/lr.sql --lrb-history $D/lrb --workers 2 --checkpoint $D/ck --checkpoint-interval 600m --dashboard 127.0.0.1:$PORT 2>$D/err.txt & RUN=$!
  ask 1 "stage=1&partition=0&worker=1" "stage=1&partition=0&worker=0"
  wait $RUN || true
  grep "rows in" $D/err.txt || cat $D/err.txt
  grep -o "paused [0-9.]* ms" $D/err.txt | tr '\n' ' '; echo
  sort $D/out.csv | md5sum
done
