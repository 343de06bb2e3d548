# The DuckDB side of `braid-bench fuzz`: one long-lived process. Each line on stdin is
# a JSON request, each answer one JSON line on stdout.
#   {"op": "load", "tables": [{"name": "s1", "path": "/tmp/x/s1.csv",
#                              "columns": [["k", "BIGINT"], ...]}]}
#   {"op": "query", "sql": "SELECT ..."}
# Answers: {"ok": true, "columns": [...], "rows": [[...], ...]} or
#          {"ok": false, "error": "..."}. Floats that JSON cannot hold travel as
# {"float": "nan" | "inf" | "-inf"}; integers beyond 64 bits as they are.
import json
import math
import sys

try:
    import duckdb
except ImportError as e:  # the fuzzer reports this line and stops
    sys.stdout.write(json.dumps({"ok": False, "error": "cannot import duckdb: %s" % e}) + "\n")
    sys.stdout.flush()
    sys.exit(1)

con = duckdb.connect()


def value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    # Decimals and the like: as a float.
    try:
        return float(v)
    except Exception:
        return str(v)


def load(req):
    for t in req["tables"]:
        cols = ", ".join("'%s': '%s'" % (n, ty) for n, ty in t["columns"])
        con.execute("DROP TABLE IF EXISTS %s" % t["name"])
        # PostgreSQL's CSV rule: an unquoted empty field is NULL, a quoted one ("")
        # the empty string; spaces are kept.
        con.execute(
            "CREATE TABLE %s AS SELECT * FROM read_csv(?, header = true, auto_detect = false, "
            "columns = {%s}, delim = ',', quote = '\"', escape = '\"', nullstr = '', "
            "allow_quoted_nulls = false)" % (t["name"], cols),
            [t["path"]],
        )
    return {"ok": True, "columns": [], "rows": []}


def query(req):
    cur = con.execute(req["sql"])
    cols = [d[0] for d in cur.description] if cur.description else []
    rows = [[value(v) for v in r] for r in cur.fetchall()]
    return {"ok": True, "columns": cols, "rows": rows}


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    try:
        req = json.loads(line)
        if req["op"] == "load":
            out = load(req)
        elif req["op"] == "query":
            out = query(req)
        else:
            out = {"ok": False, "error": "unknown op %r" % req["op"]}
    except Exception as e:
        out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
