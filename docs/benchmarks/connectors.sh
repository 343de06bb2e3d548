#!/bin/bash
# Kafka ingest against file ingest of the same rows: a tumbling count and sum per key
# over N rows (default 2,000,000) read from a CSV file and from a Kafka topic of 4
# partitions (CSV records, and JSON records), on 1 and 2 workers, 3 rounds alternating.
# The broker is Apache Kafka (KRaft, one node) from the jars .ci/run fetches
# (target/kafka/libs, or KAFKA_LIBS=); the topics are written by Braid's own Kafka sink.
# Run from the repository root after `cargo build --release -p braid-cli`.
set -e
B=${BRAID:-target/release/braid}
D=${DIR:-/tmp/braid-connectors-bench}
LIBS=${KAFKA_LIBS:-target/kafka/libs}
N=${ROWS:-2000000}
PORT=${PORT:-19392}
rm -rf $D; mkdir -p $D
awk -v n=$N 'BEGIN { srand(7); print "id,ts,k,v"; for (i = 0; i < n; i++) printf "%d,%d,%d,%d\n", i, int(i / 1000), int(rand() * 1000), int(rand() * 100) }' > $D/rows.csv
cat > $D/server.properties <<CONF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((PORT + 1))
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$((PORT + 1))
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$D/kafka
num.partitions=4
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
CONF
java -cp "$LIBS/*" kafka.tools.StorageTool format -t MkU3OEVBNTcwNTJENDM2Qk -c $D/server.properties > /dev/null 2>&1
java -Xmx1g -cp "$LIBS/*" kafka.Kafka $D/server.properties > $D/broker.log 2>&1 &
KAFKA=$!
trap "kill $KAFKA" EXIT
until (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null; do sleep 0.5; done
sleep 2
head="CREATE STREAM rows (id BIGINT NOT NULL, ts BIGINT NOT NULL, k BIGINT, v BIGINT)"
query="SELECT window_end, k, count(*) AS n, sum(v) AS total FROM rows GROUP BY TUMBLE(ts, 60), k;"
# Fill the topics with Braid's Kafka sink.
for f in csv json; do
  printf "%s WITH (path = '%s');\nCREATE SINK t WITH (sink = 'kafka', bootstrap = '127.0.0.1:%s', topic = 'rows_%s', format = '%s');\nINSERT INTO t SELECT * FROM rows;\n" \
    "$head" "$D/rows.csv" $PORT $f $f > $D/fill-$f.sql
  /usr/bin/time -f "fill $f: wall %e s" $B run $D/fill-$f.sql --workers 1
done
printf "%s WITH (path = '%s', event_time = 'ts', epoch = 60);\nCREATE SINK out WITH (sink = 'csv', path = '%s/out.csv');\nINSERT INTO out %s\n" "$head" "$D/rows.csv" $D "$query" > $D/file.sql
for f in csv json; do
  printf "%s WITH (connector = 'kafka', bootstrap = '127.0.0.1:%s', topic = 'rows_%s', format = '%s', stop = 'latest', event_time = 'ts', epoch = 60);\nCREATE SINK out WITH (sink = 'csv', path = '%s/out.csv');\nINSERT INTO out %s\n" "$head" $PORT $f $f $D "$query" > $D/kafka-$f.sql
done
for round in 1 2 3; do
  for w in 1 2; do
    for s in file kafka-csv kafka-json; do
      echo "== round $round $s workers $w load $(cut -d' ' -f1 /proc/loadavg)"
      /usr/bin/time -f "wall %e s, user %U s, sys %S s, maxrss %M KB" $B run $D/$s.sql --workers $w
      sort $D/out.csv | md5sum
    done
  done
done
