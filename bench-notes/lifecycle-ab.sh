#!/usr/bin/env bash
# Same-run A/B of the no-op task lifecycle (loadgen --mix task=1, slow_compute seconds 0,
# --poll-ms 5) against one mcpgate replica, on Redis and on the memory store, at two
# concurrencies; every run starts a fresh gateway (and flushes Redis), variants rotate within
# each repeat. Per run: lifecycles/s, HTTP requests per lifecycle, answered inline, gateway
# CPU per lifecycle (utime+stime of the process, /proc), loadgen CPU per lifecycle, Redis
# commands per lifecycle (INFO commandstats, scripts' inner commands included).
#
# Usage: bench-notes/lifecycle-ab.sh BASE_DIR NEW_DIR   (each holding release mcpgate and
#   mcpgate-loadgen). Variants: base (BASE's gateway and loadgen), new (NEW's, default answer
#   window), new-w0 (NEW's, tasks.answer_within_ms = 0). DURATION (s, default 4), REPEATS
#   (default 3), CONCURRENCY (default "8 32"). Prints one TSV line per run.
set -euo pipefail
BASE=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
DURATION=${DURATION:-4}
REPEATS=${REPEATS:-3}
CONCURRENCY=${CONCURRENCY:-8 32}
TICKS=$(getconf CLK_TCK)
OUT=$(mktemp -d)
KEY="k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

redis-server --port 0 --unixsocket "$OUT/redis.sock" --save "" --appendonly no --logfile "$OUT/redis.log" &
REDIS_PID=$!
GW_PID=""
cleanup() {
  [ -n "$GW_PID" ] && kill "$GW_PID" 2>/dev/null || true
  kill "$REDIS_PID" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -s "$OUT/redis.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
calls() { redis-cli -s "$OUT/redis.sock" info commandstats | tr -d '\r' | sed -n 's/.*:calls=\([0-9]*\),.*/\1/p' | awk '{s+=$1} END {print s+0}'; }

run() { # variant store clients
  local variant=$1 store=$2 clients=$3 dir window=50
  case $variant in base) dir=$BASE ;; new) dir=$NEW ;; new-w0) dir=$NEW window=0 ;; esac
  redis-cli -s "$OUT/redis.sock" flushall >/dev/null
  redis-cli -s "$OUT/redis.sock" config resetstat >/dev/null
  local env=(MCPGATE_LOG_LEVEL=warn)
  # The base build knows no answer window.
  [ "$variant" != base ] && env+=(MCPGATE_TASKS_ANSWER_WITHIN_MS=$window)
  [ "$store" = redis ] && env+=(MCPGATE_REDIS_URL="redis+unix://$OUT/redis.sock" MCPGATE_SEAL_KEYS=$KEY)
  rm -f "$OUT/gw.out"
  env "${env[@]}" "$dir/mcpgate" --listen 127.0.0.1:0 --toolset demo,conformance >"$OUT/gw.out" 2>"$OUT/gw.err" &
  GW_PID=$!
  for _ in $(seq 200); do grep -q 'listening on' "$OUT/gw.out" 2>/dev/null && break; sleep 0.05; done
  local url
  url="$(sed -n 's#^listening on ##p' "$OUT/gw.out")/mcp"
  local c0 r0
  c0=$(ticks "$GW_PID"); r0=$(calls)
  /usr/bin/time -f "%U %S" -o "$OUT/lg.time" "$dir/mcpgate-loadgen" --url "$url" --clients "$clients" \
    --duration "$DURATION" --mix task=1 --poll-ms 5 --quiet --report-json "$OUT/report.json" >/dev/null
  local c1 r1
  c1=$(ticks "$GW_PID"); r1=$(calls)
  kill "$GW_PID"; wait "$GW_PID" 2>/dev/null || true; GW_PID=""
  local ok req inline fails lg
  ok=$(jq '.flows_ok' "$OUT/report.json"); req=$(jq '.requests' "$OUT/report.json")
  inline=$(jq '.tasks.answered_inline // 0' "$OUT/report.json"); fails=$(jq '.flows_failed' "$OUT/report.json")
  lg=$(awk '{print $1 + $2}' "$OUT/lg.time")
  awk -v v="$variant" -v s="$store" -v c="$clients" -v ok="$ok" -v req="$req" -v inl="$inline" -v f="$fails" \
    -v cpu=$((c1 - c0)) -v t="$TICKS" -v lg="$lg" -v rc=$((r1 - r0)) -v d="$DURATION" 'BEGIN {
      printf "%s\t%s\tc=%s\t%.0f/s\treq/op %.2f\tinline %d\tfailed %d\tgw µs/op %.1f\tloadgen µs/op %.1f\tredis cmd/op %.2f\n",
        v, s, c, ok / d, req / ok, inl, f, cpu / t * 1e6 / ok, lg * 1e6 / ok, (s == "redis" ? rc / ok : 0) }'
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); DURATION=$DURATION REPEATS=$REPEATS"
for rep in $(seq "$REPEATS"); do
  for clients in $CONCURRENCY; do
    for store in redis memory; do
      # Rotated order: each repeat starts with another variant.
      variants=(base new new-w0)
      for i in 0 1 2; do
        run "${variants[$(((i + rep) % 3))]}" "$store" "$clients"
      done
    done
  done
done
