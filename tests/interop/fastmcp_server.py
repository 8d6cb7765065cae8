"""A FastMCP server (PyPI `fastmcp`, pinned by scripts/test) speaking 2026-07-28, used as an
upstream behind mcpgate by the federation tests.

Usage: fastmcp_server.py PORT MARKER_DIR, or fastmcp_server.py stdio [MARKER_DIR] (over stdio)
Tools: add (fast), slow (progress, then a result; counts its starts in MARKER_DIR), slow_safe
(the same, idempotentHint), wait (sleeps; writes MARKER_DIR/cancelled-<tag> when cancelled),
grow (adds a tool of the given name: the server's tool list changes).
"""

import asyncio
import pathlib
import sys

from fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("fm")
MARKERS = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else pathlib.Path(".")


def started(tag: str) -> None:
    # One line per start of a run, so a test can count how often a call ran.
    with open(MARKERS / f"started-{tag}", "a", encoding="utf-8") as f:
        f.write("x\n")


@mcp.tool
def add(a: int, b: int) -> int:
    "Add two integers"
    return a + b


async def _slow(tag: str, seconds: float, ctx: Context) -> str:
    started(tag)
    steps = 4
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
        await asyncio.sleep(seconds / steps)
    return f"slept {seconds}"


@mcp.tool
async def slow(tag: str, seconds: float, ctx: Context) -> str:
    "Sleep for a while, reporting progress (not idempotent)"
    return await _slow(tag, seconds, ctx)


@mcp.tool(annotations=ToolAnnotations(idempotentHint=True))
async def slow_safe(tag: str, seconds: float, ctx: Context) -> str:
    "Sleep for a while, reporting progress (idempotent)"
    return await _slow(tag, seconds, ctx)


@mcp.tool
async def wait(tag: str, seconds: float = 60) -> str:
    "Sleep; if cancelled, leave a marker"
    started(tag)
    try:
        await asyncio.sleep(seconds)
        return "waited"
    except asyncio.CancelledError:
        (MARKERS / f"cancelled-{tag}").write_text("cancelled", encoding="utf-8")
        raise


@mcp.tool
def grow(name: str) -> str:
    "Add a tool named `name` that answers 'grown'"

    def grown() -> str:
        return "grown"

    mcp.tool(grown, name=name)
    return "added"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        mcp.run(transport="stdio", show_banner=False)
    else:
        mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
