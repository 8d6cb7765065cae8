"""A FastMCP server (PyPI `fastmcp`, pinned by scripts/test) speaking 2026-07-28 that shows what
credentials reach it, used as a token-exchange upstream behind mcpgate.

Usage: fastmcp_whoami_server.py PORT MARKER_DIR
Tool: whoami (returns the Authorization header of the request that called it, or "none").
Every HTTP request it receives is logged as one line "<Mcp-Method or HTTP method>\t<Authorization
or ->" in MARKER_DIR/requests.log, so a test sees every credential that ever reached it.
"""

import pathlib
import sys

from fastmcp import FastMCP
from fastmcp.server.dependencies import get_http_headers
from starlette.middleware import Middleware

mcp = FastMCP("whoami")
MARKERS = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else pathlib.Path(".")


class RecordCredentials:
    """Pure ASGI middleware: logs each HTTP request's method and Authorization header."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            method = headers.get("mcp-method", scope["method"])
            with open(MARKERS / "requests.log", "a", encoding="utf-8") as f:
                f.write(f"{method}\t{headers.get('authorization', '-')}\n")
        await self.app(scope, receive, send)


@mcp.tool
def whoami() -> str:
    "The Authorization header this call arrived with"
    return get_http_headers(include={"authorization"}).get("authorization", "none")


if __name__ == "__main__":
    mcp.run(
        transport="http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        show_banner=False,
        middleware=[Middleware(RecordCredentials)],
    )
