#!/usr/bin/env bash
# `hintcache stats --format prometheus`, read by a real parser (the
# prometheus_client package's text parser, as the Prometheus server's own
# would): every family parses, its type is right, every sample carries the
# volume label (a path with a quote and a backslash round-trips), and the
# values are those `stats --json` gives for the same volume.
set -eu
hc=$1
. "$(dirname "$0")/functions.sh"
requires jq
requires python3
/usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null \
  || skip "python3-prometheus-client is not installed"

f=$tmp/'fa"st\.img' s=$tmp/slow.img
truncate -s 16M "$f"
truncate -s 64M "$s"
expect_status 0 "$hc" format --fast "$f" --slow "$s" --mode writeback
expect_status 0 "$hc" io "$f" write 0 1M --hint metadata
expect_status 0 "$hc" io "$f" write 2M 64k --hint background+dontneed
expect_status 0 "$hc" io "$f" read 0 256k --hint metadata
expect_status 0 "$hc" stats "$f" --json
echo "$out" > "$tmp/stats.json"
expect_status 0 "$hc" stats "$f" --format prometheus
echo "$out" > "$tmp/stats.prom"
expect_status 2 "$hc" stats "$f" --format yaml
contains "$err" "not one of text, json, prometheus" "a bad --format"
expect_status 2 "$hc" info "$f" --format prometheus

/usr/bin/python3 - "$tmp/stats.prom" "$tmp/stats.json" "$f" <<'PY' || fail "the exposition does not match stats --json"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
js = json.load(open(sys.argv[2]))
volume = sys.argv[3]
fams = {f.name: f for f in text_string_to_metric_families(text)}
def value(name, **labels):
    for f in fams.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise SystemExit(f"no sample {name} {labels}")
bad = []
for f in fams.values():
    for s in f.samples:
        if s.labels.get("volume") != volume:
            bad.append(f"{s.name}: volume label {s.labels.get('volume')!r}")
for name, typ in [("hintcache_hits", "counter"), ("hintcache_bypasses", "counter"),
                  ("hintcache_dirty_blocks", "gauge"), ("hintcache_capacity_blocks", "gauge"),
                  ("hintcache_flash_written_bytes", "counter")]:
    if fams.get(name) is None or fams[name].type != typ:
        bad.append(f"family {name}: {fams.get(name) and fams[name].type}")
for cls, c in js["classes"].items():
    for op in ("read", "write"):
        for key, metric in [("hits", "hintcache_hits_total"), ("misses", "hintcache_misses_total"),
                            ("admissions", "hintcache_admissions_total"),
                            ("bytes", "hintcache_client_bytes_total")]:
            if value(metric, **{"class": cls, "op": op}) != c[op][key]:
                bad.append(f"{metric} {cls} {op}")
        for reason, n in c[op]["bypass"].items():
            if value("hintcache_bypasses_total", **{"class": cls, "op": op, "reason": reason}) != n:
                bad.append(f"bypass {cls} {op} {reason}")
    if value("hintcache_dirty_blocks", **{"class": cls}) != c["dirty"]:
        bad.append(f"dirty {cls}")
    if value("hintcache_flash_written_bytes_total", **{"class": cls}) != c["flash_bytes_written"]:
        bad.append(f"flash {cls}")
if value("hintcache_capacity_blocks") != js["cache_blocks"]:
    bad.append("capacity")
if value("hintcache_misses_total", **{"class": "metadata", "op": "write"}) < 256:
    bad.append("the metadata writes are not there")
if bad:
    raise SystemExit("; ".join(bad[:10]))
PY
echo "cli_prometheus: ok ($(grep -c '^hintcache_' "$tmp/stats.prom") samples)"
