"""The embedded peer of the search benchmark: chDB (ClickHouse in-process), run by search.py
with the interpreter of build/bench/venv-peer (tests/bench/requirements-bench.txt), so that
neither `make test` nor the main venv needs chdb.

  peer_chdb.py load DBDIR CORPUS     builds table logs from the corpus file (once; cached)
  peer_chdb.py run DBDIR             reads a JSON list of {"sql", "repeats", "warmup"} on
                                     stdin; prints one JSON object per query: the wall times
                                     of each run (s) and the last run's result (TSV text)

The table: ts DateTime64(6), host String, msg String (the message part of each line), ordered
by ts, with a tokenbf_v1 skip index on lower(msg), so hasToken(lower(msg), 'tok') is a
case-insensitive token test that can skip granules. The filter is 64 KiB per granule of 8,192
rows. A granule of this corpus holds ~165,000 distinct tokens (redrawn numbers, ids), so 23 % of
the granules pass for a rare token; a 256 KiB filter passes fewer but made every token query
1.5-3x slower (reading the larger index costs more than it saves).
"""

from __future__ import annotations

import json
import sys
import time

from chdb import session as chs

SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (
    ts DateTime64(6, 'UTC'),
    host String,
    msg String,
    INDEX tok lower(msg) TYPE tokenbf_v1(65536, 3, 0) GRANULARITY 1
) ENGINE = MergeTree ORDER BY ts
"""

LOAD = r"""
INSERT INTO logs
SELECT parseDateTime64BestEffort(t, 6, 'UTC'), h, m
FROM file('{path}', 'Regexp', 't String, h String, m String')
SETTINGS format_regexp = '^<\\d+>1 (\\S+) (\\S+) \\S+ \\S+ \\S+ - (.*)$',
         format_regexp_escaping_rule = 'Raw', format_regexp_skip_unmatched = 0,
         max_insert_threads = 2, max_threads = 2
"""


def load(db: str, corpus: str) -> None:
    s = chs.Session(db)
    s.query("DROP TABLE IF EXISTS logs")
    s.query(SCHEMA)
    t = time.monotonic()
    s.query(LOAD.format(path=corpus.replace("'", "\\'")))
    t1 = time.monotonic()
    s.query("OPTIMIZE TABLE logs FINAL")
    t2 = time.monotonic()
    n = s.query("SELECT count() FROM logs", "TabSeparated").data().strip()
    parts = s.query(
        "SELECT count(), sum(bytes_on_disk) FROM system.parts WHERE table = 'logs' AND active",
        "TabSeparated",
    ).data()
    version = s.query("SELECT version()", "TabSeparated").data().strip()
    s.close()
    print(
        json.dumps(
            {
                "rows": int(n),
                "load_s": t1 - t,
                "optimize_s": t2 - t1,
                "parts": parts.strip(),
                "version": version,
            }
        )
    )


def run(db: str) -> None:
    s = chs.Session(db)
    s.query("SET max_threads = 2")
    for q in json.load(sys.stdin):
        try:
            for _ in range(q.get("warmup", 1)):
                s.query(q["sql"], "TabSeparated").data()
            times = []
            out = ""
            for _ in range(q["repeats"]):
                t = time.perf_counter()
                out = s.query(q["sql"], "TabSeparated").data()
                times.append(time.perf_counter() - t)
            rows = out.count("\n")
            print(json.dumps({"times": times, "rows": rows, "result": out[:20000]}), flush=True)
        except Exception as e:  # noqa: BLE001 - reported per query, the run goes on
            print(json.dumps({"error": str(e)[:500]}), flush=True)
    s.close()


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "load":
        load(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
