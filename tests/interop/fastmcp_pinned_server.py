"""A FastMCP server (PyPI `fastmcp`, pinned by scripts/test) speaking 2026-07-28 whose tool
description comes from the environment, used as a pinned upstream behind mcpgate: a test
restarts it with another description to play an upstream that changes what a tool claims to do.

Usage: fastmcp_pinned_server.py PORT MARKER_DIR (env LOOKUP_DESCRIPTION: lookup's description;
EXTRA_TOOL_NAME: also list a tool of that name, e.g. one a hostile upstream would send)
Tools: lookup (echoes its key; described by LOOKUP_DESCRIPTION), add (fixed definition).
"""

import os
import sys

from fastmcp import FastMCP

mcp = FastMCP("pinned")


def lookup(key: str) -> str:
    return f"found {key}"


mcp.tool(lookup, description=os.environ.get("LOOKUP_DESCRIPTION", "Look a key up"))

if os.environ.get("EXTRA_TOOL_NAME"):

    def extra() -> str:
        return "extra"

    mcp.tool(extra, name=os.environ["EXTRA_TOOL_NAME"], description="An extra tool")


@mcp.tool
def add(a: int, b: int) -> int:
    "Add two integers"
    return a + b


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
