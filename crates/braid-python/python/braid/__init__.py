"""Braid from Python: parallel continuous queries over streams.

    import braid

    s = braid.Session(workers=2)
    s.create_stream("calls", rows, "caller BIGINT, dur BIGINT, at BIGINT",
                    event_time="at", epoch=60)
    s.register_function("cost", lambda d: d * 0.02, returns="DOUBLE")
    r = s.query("SELECT caller, sum(cost(dur)) AS spent FROM calls "
                "GROUP BY TUMBLE(at, 3600), caller")
    r.rows()          # [(caller, spent), ...] in the serial order
    r.to_arrow()      # a pyarrow.Table
    r.to_pandas()     # a pandas.DataFrame

    s.create_stream("orders", pyarrow_table, "id BIGINT, amount DOUBLE")
    for batch in s.subscribe("SELECT * FROM calls WHERE dur > 600"):
        print(batch.rows())   # each batch as the query makes it

Python functions (scalar functions, stream functions) run holding the interpreter's
lock; everything else runs on Braid's worker threads without it. A Python exception or
a value of the wrong type is a fault of the row (counted in `result.faults`, the row
skipped), never a NULL.
"""

from ._braid import QueryResult, Session, Subscription

__all__ = ["Session", "QueryResult", "Subscription"]
