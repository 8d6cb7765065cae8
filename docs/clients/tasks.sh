#!/usr/bin/env bash
# The raw 2026-07-28 wire (curl and jq): a tools/call that declares the tasks extension gets a
# task; tasks/get is polled until the task ends, and its result comes inline.
# MCPGATE_URL: the gateway (default http://127.0.0.1:8080/mcp); MCPGATE_TOKEN: a bearer token.
set -euo pipefail
URL=${MCPGATE_URL:-http://127.0.0.1:8080/mcp}
AUTH=()
[ -z "${MCPGATE_TOKEN:-}" ] || AUTH=(-H "Authorization: Bearer $MCPGATE_TOKEN")

# mcp METHOD NAME PARAMS: one request. Mcp-Name is the tool (tools/call) or the task id
# (tasks/*), so a load balancer can route without reading the body. Every request carries its
# version and capabilities in _meta; here the capabilities declare the tasks extension.
mcp() {
  local meta='{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}'
  curl -sS --fail-with-body "$URL" "${AUTH[@]}" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H "Mcp-Method: $1" -H "Mcp-Name: $2" \
    -d "$(jq -cn --arg method "$1" --argjson params "$3" --argjson meta "$meta" \
      '{jsonrpc: "2.0", id: 1, method: $method, params: ($params + {_meta: $meta})}')"
}

# slow_report (demo toolset) takes `seconds` seconds: too long to answer at once, so the
# server answers with a task: {"resultType": "task", "taskId": ..., "status": "working", ...}.
created=$(mcp tools/call slow_report '{"name": "slow_report", "arguments": {"topic": "tasks", "seconds": 2}}')
echo "$created"
task=$(jq -er '.result | select(.resultType == "task") | .taskId' <<<"$created")

# tasks/get while the task is "working", as often as its pollIntervalMs suggests. (A task
# that asks for input is "input_required" with its inputRequests; tasks/update answers them.)
while :; do
  got=$(mcp tasks/get "$task" "$(jq -cn --arg task "$task" '{taskId: $task}')")
  status=$(jq -er '.result.status' <<<"$got")
  [ "$status" = working ] || break
  sleep "$(jq -r '(.result.pollIntervalMs // 1000) / 1000' <<<"$got")"
done
echo "$got"
jq -e '.result.status == "completed"' <<<"$got" >/dev/null
