#!/usr/bin/env bash
# A/B of federation CPU: one upstream (mcpgate, before binary), two gateways (A = before, B = after)
# pointing at it; interleaved loadgen runs; CPU/call per gateway process from /proc.
#   ab.sh A_BIN B_BIN DURATION CLIENTS REPEATS
set -euo pipefail
A=$1 B=$2 DUR=${3:-4} CL=${4:-8} REP=${5:-3}
LG=/work/wt-f/target/before/mcpgate-loadgen
OUT=/tmp/abfed/out; mkdir -p $OUT
TICKS=$(getconf CLK_TCK)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
start() { local name=$1 bin=$2; shift 2
  MCPGATE_LOG_LEVEL=warn $bin --listen 127.0.0.1:0 "$@" >$OUT/$name.stdout 2>$OUT/$name.stderr &
  PID=$!; PIDS+=($PID)
  for _ in $(seq 300); do ADDR=$(sed -n 's#^listening on http://##p' $OUT/$name.stdout | head -n1); [ -n "$ADDR" ] && return 0; sleep 0.1; done
  echo "$name did not start" >&2; cat $OUT/$name.stderr >&2; exit 1; }
start upstream /work/wt-f/target/before/mcpgate --toolset demo; UA=$ADDR UP=$PID
cat >$OUT/gw.toml <<TOML
toolset = ["demo"]
[[upstream]]
name = "u"
transport = "http"
url = "http://$UA/mcp"
task = "never"
max_concurrency = 256
TOML
start ga $A --config $OUT/gw.toml; GA=$ADDR GAP=$PID
start gb $B --config $OUT/gw.toml; GB=$ADDR GBP=$PID
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
run() { local label=$1 addr=$2 pid=$3 tool=$4 c=$5
  local g0=$(cpu $pid) u0=$(cpu $UP)
  $LG --url http://$addr/mcp --clients $c --duration $DUR --quiet --mix sync=1 --echo-tool $tool --max-failures 0 --report-json $OUT/r.json >/dev/null
  local g1=$(cpu $pid) u1=$(cpu $UP)
  jq -r --arg l "$label" --argjson t $TICKS --argjson g $((g1-g0)) --argjson u $((u1-u0)) '.scenarios[0] as $s | "\($l)\t\(.requests_per_second|floor)\t\($s.latency_ms.p50)\t\((($g/$t)*1e6/.requests)|floor)\t\((($u/$t)*1e6/.requests)|floor)"' $OUT/r.json
}
for r in $(seq $REP); do run "direct c=1" $UA $UP echo 1; run "A fed c=1" $GA $GAP u_echo 1; run "B fed c=1" $GB $GBP u_echo 1; done; [ -n "${P50_ONLY:-}" ] && exit 0
echo -e "run\treq/s\tp50ms\tgwCPUus\tupCPUus"
for r in $(seq $REP); do
  for c in $CL 1; do
    if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for w in $order; do
      if [ $w = A ]; then addr=$GA pid=$GAP; else addr=$GB pid=$GBP; fi
      run "$w builtin c=$c" $addr $pid echo $c
      run "$w fed     c=$c" $addr $pid u_echo $c
    done
  done
done
