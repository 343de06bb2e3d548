"""Reads the server's /metrics with Prometheus's own text-format parser
(prometheus_client) and prints every sample as `name{k=v,...} value`, one a line,
sorted: the Rust test compares them with what it inserted and with SHOW QUERIES."""
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

url = sys.argv[1]
with urllib.request.urlopen(url) as r:
    kind = r.headers.get("Content-Type", "")
    text = r.read().decode()
if not kind.startswith("text/plain"):
    sys.exit(f"Content-Type {kind!r}, not text/plain")
lines = []
for family in text_string_to_metric_families(text):
    if not family.documentation:
        sys.exit(f"{family.name} has no HELP")
    if family.type not in ("counter", "gauge", "histogram"):
        sys.exit(f"{family.name} has type {family.type}")
    for s in family.samples:
        if family.type == "counter" and not s.name.endswith("_total"):
            sys.exit(f"counter sample {s.name} does not end in _total")
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        lines.append(f"{s.name}{{{labels}}} {s.value:g}")
print("\n".join(sorted(lines)))
