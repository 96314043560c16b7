"""The search benchmark's operations, issue-4 targets and report tables (tests/bench/search.py;
split from it): the main table, issue 18's verdicts (new against an old build, new against
VictoriaLogs) and the counts each engine found."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from search import QClass

BUCKETS = 100

# Targets of issue 4 (ms, p50 on 2 cores, warm cache), by (class, operation).
TARGETS = {
    ("rare token", "newest"): 20,
    ("common token", "newest"): 20,
    ("prefix appl*", "newest"): 100,
    ("prefix appl*", "count"): 100,
    ("prefix appl*", "hist"): 100,
    ("prefix appl*", "top"): 100,
    ("leading *pple", "newest"): 500,
    ("leading *pple", "count"): 500,
    ("leading *pple", "hist"): 500,
    ("leading *pple", "top"): 500,
    ("infix *ppl*", "newest"): 500,
    ("infix *ppl*", "count"): 500,
    ("infix *ppl*", "hist"): 500,
    ("infix *ppl*", "top"): 500,
    ("common token", "count"): 200,
    ("common token", "hist"): 200,
}

OPS = ("newest", "count", "hist", "top")
OP_TITLE = {
    "newest": "newest 100",
    "count": "count",
    "hist": f"histogram {BUCKETS}",
    "top": "top-10 hosts",
}


def fmt_ms(r: dict | None) -> str:
    if r is None:
        return "—"
    if "timeout" in r:
        return f"> {1000 * r['timeout']:,.0f}"
    if "error" in r:
        return "error"
    return f"{r['p50_ms']:,.1f} / {r['p95_ms']:,.1f}"


def verdict(qname: str, op: str, lb: dict | None, others: list[dict | None]) -> tuple[str, str]:
    tgt = TARGETS.get((qname, op))
    if lb is None or "error" in lb:
        return (f"<= {tgt} ms" if tgt else "faster than the peers", "n/a")
    ok = True
    why = []
    if tgt is not None and lb["p50_ms"] > tgt:
        ok = False
        why.append("target")
    for o in others:
        if o is not None and "error" not in o and lb["p50_ms"] >= o["p50_ms"]:
            ok = False
            why.append("peer")
            break
    tstr = f"<= {tgt} ms, faster" if tgt else "faster than the peers"
    return tstr, "pass" if ok else "FAIL (" + ", ".join(why) + ")"


NOISE = 1.10  # "no slower than today beyond noise": new p50 <= 1.10 x old p50, or IQRs overlap


def ok(r: dict | None) -> bool:
    return r is not None and "error" not in r


def ratio(num: dict | None, den: dict | None) -> str:
    if not ok(num) or not ok(den) or den["p50_ms"] <= 0:  # type: ignore[index]
        return "—"
    r = num["p50_ms"] / den["p50_ms"]  # type: ignore[index]
    return f"{r:,.1f}x" if r >= 10 else f"{r:.2f}x"


def old_verdict(new: dict | None, old: dict | None) -> str:
    """New against the old binary: pass when the median ratio is <= NOISE; "pass (noise)" when
    it is above but the p25-p75 ranges overlap (new p25 <= old p75); else FAIL."""
    if not ok(new) or not ok(old):
        return "n/a"
    if new["p50_ms"] <= NOISE * old["p50_ms"]:  # type: ignore[index]
        return "pass"
    if new["p25_ms"] <= old["p75_ms"]:  # type: ignore[index]
        return "pass (noise)"
    return "FAIL"


def vl_verdict(new: dict | None, vl: dict | None) -> str:
    if ok(new) and vl and "timeout" in vl:
        return "pass (VL timed out)" if new["p50_ms"] < 1000 * vl["timeout"] else "n/a"  # type: ignore[index]
    if not ok(new) or not ok(vl):
        return "n/a"
    return "pass" if new["p50_ms"] < vl["p50_ms"] else "FAIL"  # type: ignore[index]


def table(cls: list[QClass], res: dict, engines: list[str]) -> str:
    peers = [e for e in ("rg", "chdb", "vl") if e in engines]
    head = ["class", "query", "op", "logbox p50/p95 ms"]
    if "old" in engines:
        head += ["old p50/p95 ms", "new/old"]
    head += [f"{e} p50/p95 ms" for e in peers]
    head += [f"{e}/logbox" for e in peers]
    head += ["target", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for qc in cls:
        for op in OPS:
            lb = res["logbox"].get((qc.name, op))
            row = [qc.name, f"`{qc.q}`", OP_TITLE[op], fmt_ms(lb)]
            if "old" in engines:
                old = res["old"].get((qc.name, op))
                row += [fmt_ms(old), ratio(lb, old)]
            pr = [res[e].get((qc.name, op)) for e in peers]
            row += [fmt_ms(r) for r in pr]
            row += [ratio(r, lb) for r in pr]
            row += list(verdict(qc.name, op, lb, pr))
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def issue_table(cls: list[QClass], res: dict, engines: list[str]) -> tuple[str, dict[str, int]]:
    """Issue 18's speed verdicts per class x op: new vs old (NOISE band), new vs VictoriaLogs."""
    head = ["class", "op", "new p50 (p25-p75)"]
    if "old" in engines:
        head += ["old p50 (p25-p75)", "new/old", "no slower than old"]
    if "vl" in engines:
        head += ["VictoriaLogs p50 (p25-p75)", "VL/new", "faster than VL"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    tally = {"old_pass": 0, "old_fail": 0, "vl_pass": 0, "vl_fail": 0}

    def iqr(r: dict | None) -> str:
        if not ok(r):
            return fmt_ms(r)
        return f"{r['p50_ms']:,.1f} ({r['p25_ms']:,.1f}-{r['p75_ms']:,.1f})"  # type: ignore[index]

    for qc in cls:
        for op in OPS:
            lb = res["logbox"].get((qc.name, op))
            row = [qc.name, OP_TITLE[op], iqr(lb)]
            if "old" in engines:
                old = res["old"].get((qc.name, op))
                v = old_verdict(lb, old)
                tally["old_fail" if v == "FAIL" else "old_pass"] += v != "n/a"
                row += [iqr(old), ratio(lb, old), v]
            if "vl" in engines:
                vl = res["vl"].get((qc.name, op))
                v = vl_verdict(lb, vl)
                tally["vl_fail" if v == "FAIL" else "vl_pass"] += v != "n/a"
                if qc.name.startswith("phrase") and op == "count":
                    v += " (phrase count)"
                row += [iqr(vl), ratio(vl, lb), v]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines), tally


def counts_table(cls: list[QClass], res: dict, engines: list[str]) -> str:
    cols = [e for e in ("logbox", "old", "rg", "chdb", "vl") if e == "logbox" or e in engines]
    lines = [
        "| class | query | " + " | ".join(f"{e} count" for e in cols) + " | logbox top host |",
        "|---|---|" + "---|" * (len(cols) + 1),
    ]
    for qc in cls:

        def c(engine: str, op: str, qc: QClass = qc) -> str:
            r = res.get(engine, {}).get((qc.name, op))
            if r is None:
                return "—"
            if "timeout" in r:
                return "timed out"
            if "error" in r:
                return "error"
            return f"{r['result']:,}" if isinstance(r["result"], int) else str(r["result"][:1])

        lines.append(
            f"| {qc.name} | `{qc.q}` | "
            + " | ".join(c(e, "count") for e in cols)
            + f" | {c('logbox', 'top')} |"
        )
    return "\n".join(lines)
