#!/usr/bin/env bash
# The A/B run behind bench-notes/sync.md: for each repeat, each LABEL:GATEWAY:LOADGEN pair in turn
# (interleaved, same run), one fresh `mcpgate --toolset demo,conformance` (memory store) driven by
# `mcpgate-loadgen --mix sync=1`. Results land in /tmp/sbench.
# usage: ab.sh DURATION CLIENTS REPEATS label:gwbin:lgbin ...
# per run: gateway CPU (utime+stime delta, /proc) and loadgen CPU (rusage via /usr/bin/time) per flow.
set -euo pipefail
mkdir -p /tmp/sbench
DUR=$1; CL=$2; REP=$3; shift 3
TICKS=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for r in $(seq $REP); do
  for spec in "$@"; do
    IFS=: read -r label gw lg <<<"$spec"
    out=/tmp/sbench/$label.$r
    MCPGATE_LOG_LEVEL=warn "$gw" --listen 127.0.0.1:0 --toolset demo,conformance >$out.gw.out 2>$out.gw.err &
    gpid=$!
    for _ in $(seq 100); do grep -q 'listening on' $out.gw.out 2>/dev/null && break; sleep 0.05; done
    url="$(sed -n 's#^listening on ##p' $out.gw.out)/mcp"
    "$lg" --url "$url" --clients $CL --duration 0.5 --mix sync=1 --quiet >/dev/null 2>&1
    g0=$(cpu $gpid)
    /usr/bin/time -f "%U %S" -o $out.time "$lg" --url "$url" --clients $CL --duration $DUR --mix sync=1 --quiet --report-json $out.json >$out.lg.out 2>&1
    g1=$(cpu $gpid)
    kill $gpid; wait $gpid 2>/dev/null || true
    flows=$(jq '.flows_ok' $out.json); failed=$(jq '.flows_failed' $out.json); ops=$(jq '.flows_per_second' $out.json)
    read -r lu ls < $out.time
    awk -v l=$label -v r=$r -v g=$((g1-g0)) -v t=$TICKS -v lu=$lu -v ls=$ls -v f=$flows -v ops=$ops -v fail=$failed \
      'BEGIN{printf "%-8s r%d ops/s=%8.1f gw_us/op=%6.1f lg_us/op=%6.1f flows=%d failed=%d\n", l, r, ops, g/t*1e6/f, (lu+ls)*1e6/f, f, fail}'
  done
done
