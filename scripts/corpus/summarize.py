#!/usr/bin/python3
"""Tables of the trace corpus, for traces/README.md (scripts/record-corpus).

    summarize.py DIR NAME...

Reads DIR/NAME.summary.txt (the recorder's summary) and DIR/NAME.replay.txt
(`hintcache replay` at 1, 5 and 10 % of the footprint) of each trace and
prints Markdown: one table of the traces (requests, ops, bytes, footprint,
the largest labels), then per trace the replay's read-miss ratios of the
unhinted default, LRU, the hinted strategies and the oracle, with the share
of the gap between the unhinted default and the oracle each strategy
closes (negative: the hints made read misses worse).
"""
import re
import sys


def summary(path):
    text = open(path).read()
    m = re.search(r"recorded \S+ for ([\d.]+) s: (\d+) requests \(R (\d+), W (\d+), D (\d+), "
                  r"F (\d+)\), ([\d.]+) MiB read, ([\d.]+) MiB written; footprint (\d+) blocks "
                  r"of 4 KiB \(([\d.]+) GiB\)", text)
    if not m:
        sys.exit(f"{path}: no summary line")
    labels = re.search(r"labels\s+(.*)", text).group(1)
    return {"secs": float(m.group(1)), "requests": int(m.group(2)), "R": int(m.group(3)),
            "W": int(m.group(4)), "F": int(m.group(6)), "read": float(m.group(7)),
            "written": float(m.group(8)), "footprint": int(m.group(9)),
            "gib": float(m.group(10)), "labels": labels}


def replay(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) < 10 or not f[2].isdigit() or not f[3].isdigit():
            continue
        rows[(f[0], f[1], int(f[2]))] = (float(f[4]), float(f[5]))
    return rows


def main():
    d, names = sys.argv[1], sys.argv[2:]
    print("| trace | window | requests | R / W / F | read / written | footprint | largest labels |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        s = summary(f"{d}/{n}.summary.txt")
        top = ", ".join(s["labels"].split(", ")[:4])
        print(f"| `{n}` | {s['secs']:.0f} s | {s['requests']:,} | {s['R']:,} / {s['W']:,} / "
              f"{s['F']:,} | {s['read'] / 1024:.1f} / {s['written'] / 1024:.1f} GiB | "
              f"{s['footprint']:,} blocks ({s['gib']:.2f} GiB) | {top} |")
    print()
    print("Read-miss ratio (%) by cache size (share of the footprint), policy `hintaware` "
          "unless named; in brackets, the share of the gap between `none` and `oracle` that a "
          "row closes (negative: worse than no hints).")
    print()
    for n in names:
        r = replay(f"{d}/{n}.replay.txt")
        sizes = sorted({k[2] for k in r})
        print(f"**{n}**")
        print()
        print("| strategy | " + " | ".join(f"{p} % ({c:,} blocks)" for p, c in zip((1, 5, 10), sizes))
              + " |")
        print("|---|" + "---|" * len(sizes))
        for strat, pol in (("none", "hintaware"), ("none", "lru"), ("process", "hintaware"),
                           ("file", "hintaware"), ("io", "hintaware"), ("oracle", "belady")):
            cells = []
            for c in sizes:
                if (strat, pol, c) not in r:
                    cells.append("–")
                    continue
                rd = r[(strat, pol, c)][1]
                base, best = r[("none", "hintaware", c)][1], r[("oracle", "belady", c)][1]
                gap = (base - rd) / (base - best) * 100 if base > best else 0.0
                cells.append(f"{rd:.2f}" + ("" if strat == "none" and pol == "hintaware"
                                            or strat == "oracle" else f" ({gap:+.0f} %)"))
            name = strat if pol == "hintaware" else f"{strat} ({pol})"
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()


main()
