"""A FastMCP server (PyPI `fastmcp`, pinned by scripts/test) speaking 2026-07-28, the upstream of
the governance test (policy, virtual servers, tool overrides, pinned definitions): its tools
answer with the arguments they were given, so a test sees what the gateway sent upstream.

Usage: fastmcp_governed_server.py PORT MARKER_DIR (env LOOKUP_DESCRIPTION: lookup's description,
so a restart with another one plays an upstream that changes what a tool claims to do)
Tools: lookup (echoes its key), ticket (echoes its title and team), delete_repository (echoes the
name: a tool some callers may not use).
"""

import os
import sys

from fastmcp import FastMCP

mcp = FastMCP("governed")


def lookup(key: str) -> str:
    return f"found {key}"


mcp.tool(lookup, description=os.environ.get("LOOKUP_DESCRIPTION", "Look a key up"))


@mcp.tool
def ticket(title: str, team: str, priority: str = "normal") -> str:
    "Open a ticket for a team"
    return f"ticket for {team} ({priority}): {title}"


@mcp.tool
def delete_repository(name: str) -> str:
    "Delete a repository"
    return f"deleted {name}"


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
