# The official MCP Python SDK (pip install mcp==2.3.0) calling mcpgate in both protocol eras.
# MCPGATE_URL: the gateway (default http://127.0.0.1:8080/mcp); MCPGATE_TOKEN: a bearer token
# (unset: no Authorization header, for auth = "none").
import asyncio
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = os.environ.get("MCPGATE_URL", "http://127.0.0.1:8080/mcp")
TOKEN = os.environ.get("MCPGATE_TOKEN")


async def main() -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    # "legacy": the 2025-11-25 initialize handshake. "2026-07-28": no handshake; every request
    # carries its version and capabilities. ("auto", the default, asks server/discover first.)
    for mode in ("legacy", "2026-07-28"):
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
            async with Client(streamable_http_client(URL, http_client=http), mode=mode) as client:
                tools = await client.list_tools()
                result = await client.call_tool("echo", {"text": "hello"})
                print(f"{client.protocol_version}: {len(tools.tools)} tools; echo said {result.content[0].text}")


asyncio.run(main())
