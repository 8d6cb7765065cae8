"""A FastMCP server (PyPI `fastmcp`, pinned by scripts/test) protected by OAuth: it accepts only
JWT access tokens (RS256) its authorization server issued for it, and names that server in its
protected resource metadata (RFC 9728), for the tests of mcpgate's upstream OAuth client.

Usage: fastmcp_protected_server.py PORT ISSUER
It serves http://127.0.0.1:PORT/mcp; a token must carry issuer ISSUER (keys from ISSUER/jwks),
audience http://127.0.0.1:PORT/mcp and scope mcp:tools. A request without one is answered 401
with a Bearer challenge naming the resource metadata.
Tools: whoami (returns the token's `sub`); slow_whoami (the same after sleeping, idempotent: a
call a gateway task runs, long enough to outlive a short-lived token; given `release`, a file
path, it returns as soon as that file exists, so a test ends the wait when it has seen what it
waited for instead of sleeping a fixed time).
"""

import asyncio
import os
import sys

from fastmcp import FastMCP
from fastmcp.server.auth import RemoteAuthProvider
from fastmcp.server.auth.providers.jwt import JWTVerifier
from fastmcp.server.dependencies import get_access_token
from mcp.types import ToolAnnotations

PORT, ISSUER = int(sys.argv[1]), sys.argv[2]
BASE = f"http://127.0.0.1:{PORT}"

verifier = JWTVerifier(
    jwks_uri=f"{ISSUER}/jwks",
    issuer=ISSUER,
    audience=f"{BASE}/mcp",
    algorithm="RS256",
    required_scopes=["mcp:tools"],
)
auth = RemoteAuthProvider(
    token_verifier=verifier,
    authorization_servers=[ISSUER],
    base_url=BASE,
    scopes_supported=["mcp:tools"],
)
mcp = FastMCP("protected", auth=auth)


@mcp.tool
def whoami() -> str:
    "The subject of the access token this call arrived with"
    return get_access_token().claims["sub"]


@mcp.tool(annotations=ToolAnnotations(idempotentHint=True))
async def slow_whoami(seconds: float, release: str | None = None) -> str:
    "The subject of the access token this call arrived with, after `seconds` or once the file `release` exists"
    sub = get_access_token().claims["sub"]
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if release is not None and os.path.exists(release):
            break
        await asyncio.sleep(min(0.05, max(0.0, deadline - asyncio.get_running_loop().time())))
    return sub


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=PORT, path="/mcp", show_banner=False)
