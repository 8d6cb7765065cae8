#!/usr/bin/env bash
# tasks/get of a finished task on one mcpgate replica with the Redis store, A/B in one run:
# for each repeat and concurrency, each build in rotated order gets a fresh redis-server (own
# loopback port, no persistence) and a fresh replica (--toolset demo,conformance), then
# `mcpgate-loadgen --mix get=1` for DURATION s. Prints gets/s, replica CPU µs/get and Redis CPU
# µs/get (utime+stime from /proc and INFO cpu), Redis commands/get (INFO commandstats).
# Usage: bench-notes/get-bench.sh BIN_DIR_A BIN_DIR_B   (each holds release mcpgate and mcpgate-loadgen)
set -euo pipefail
DURATION=${DURATION:-4} REPEATS=${REPEATS:-3} CLIENTS_LIST=${CLIENTS_LIST:-"8 32"}
OUT=${OUT:-/tmp/get-bench}; mkdir -p "$OUT"
TICKS=$(getconf CLK_TCK)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_cpu() { redis-cli -p "$1" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/{s += $2} END {printf "%.6f", s}'; }
redis_calls() { redis-cli -p "$1" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_/ && $1 != "cmdstat_info" {s += $3} END {print s+0}'; }
run() { # BIN CLIENTS
  local bin=$1 clients=$2 port rpid gpid url
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$OUT/redis.log" 2>&1 & rpid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  MCPGATE_REDIS_URL="redis://127.0.0.1:$port" MCPGATE_SEAL_KEYS="k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" \
    MCPGATE_LOG_LEVEL=warn "$bin/mcpgate" --listen 127.0.0.1:0 --toolset demo,conformance >"$OUT/gw.out" 2>"$OUT/gw.err" & gpid=$!
  for _ in $(seq 600); do grep -q "listening on" "$OUT/gw.out" 2>/dev/null && break; sleep 0.05; done
  grep -q "listening on" "$OUT/gw.out" || { cat "$OUT/gw.err" >&2; exit 1; }
  url="$(sed -n 's#^listening on ##p' "$OUT/gw.out")/mcp"
  # Warm-up: each client creates and settles its task (not measured).
  "$bin/mcpgate-loadgen" --url "$url" --clients "$clients" --duration 1 --quiet --mix get=1 >/dev/null
  local c0 r0 k0 c1 r1 k1
  c0=$(awk '{print $14 + $15}' "/proc/$gpid/stat"); r0=$(redis_cpu "$port"); k0=$(redis_calls "$port")
  "$bin/mcpgate-loadgen" --url "$url" --clients "$clients" --duration "$DURATION" --quiet --mix get=1 \
    --max-failures 0 --report-json "$OUT/r.json" >/dev/null
  c1=$(awk '{print $14 + $15}' "/proc/$gpid/stat"); r1=$(redis_cpu "$port"); k1=$(redis_calls "$port")
  kill "$gpid"; wait "$gpid" 2>/dev/null || true
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$rpid"; wait "$rpid" 2>/dev/null || true
  jq -r --arg b "$bin" --arg c "$clients" --argjson cpu "$((c1 - c0))" --argjson t "$TICKS" \
    --argjson r "$(awk -v a="$r0" -v b="$r1" 'BEGIN{print b-a}')" --argjson k "$((k1 - k0))" '
    (.flows_ok + .flows_failed) as $n |
    "\($b) c=\($c) gets/s=\(.flows_per_second | floor) gw_us=\((($cpu / $t) * 1e6 / $n) | floor) redis_us=\(($r * 1e6 / $n) | floor) cmds=\(($k / $n * 100 | round) / 100) failed=\(.flows_failed)"' "$OUT/r.json"
}
for rep in $(seq "$REPEATS"); do
  for clients in $CLIENTS_LIST; do
    if [ $((rep % 2)) -eq 1 ]; then order="$1 $2"; else order="$2 $1"; fi
    for bin in $order; do run "$bin" "$clients"; done
  done
done
