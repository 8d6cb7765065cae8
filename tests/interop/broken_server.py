"""A misbehaving stdio MCP server (2025-11-25, standard library only) for fault tests:
`echo` answers properly, `garbage` prints a line that is not JSON-RPC and then an answer that
is not a tool result, `huge` answers with a message far over the gateway's limit, `crash`
exits mid-call, `novel` answers content of a kind no spec defines (relayed as it is).
"""

import json
import sys

TOOLS = [
    {"name": n, "description": d, "inputSchema": {"type": "object"}}
    for n, d in [
        ("echo", "echoes"),
        ("garbage", "answers garbage"),
        ("huge", "answers too much"),
        ("crash", "exits mid-call"),
        ("novel", "answers content of a kind no spec names yet"),
    ]
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg:
        continue
    mid, method = msg["id"], msg.get("method")
    params = msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "broken", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = params.get("name")
        if name == "echo":
            text = json.dumps(params.get("arguments"), separators=(",", ":"))
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
        elif name == "garbage":
            sys.stdout.write("this is not json\n")
            send({"jsonrpc": "2.0", "id": mid, "result": "not a tool result"})
        elif name == "huge":
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "x" * 3_000_000}]}})
        elif name == "crash":
            sys.exit(3)
        elif name == "novel":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "hologram", "frames": [1, 2]}], "x-vendor": {"k": "v"}}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
