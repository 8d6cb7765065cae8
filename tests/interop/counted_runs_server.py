"""A FastMCP server (PyPI `fastmcp`, pinned by scripts/test) speaking 2026-07-28 whose one real
tool is not idempotent and counts its runs, so the load generator can tell a task run twice
(`--counted-tool` / `--run-ledger-tool`) from one run once.

Usage: counted_runs_server.py PORT MARKER_DIR (the marker dir is unused: the ledger is in memory)
Tools: count_run(key, seconds=0) records one run of `key`, sleeps `seconds`, answers "ran <key>";
run_ledger() answers structuredContent {"runs": {key: count}}. Bounded: keys of at most 200
bytes, at most 100,000 keys, at most 600 s of sleep.
"""

import asyncio
import sys

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations

MAX_KEY_BYTES = 200
MAX_KEYS = 100_000
MAX_SECONDS = 600

mcp = FastMCP("counted-runs")

# Runs per key, for the life of the process (a restart forgets them: the ledger is one run's).
runs: dict[str, int] = {}


@mcp.tool(annotations=ToolAnnotations(idempotentHint=False, readOnlyHint=False))
async def count_run(key: str, seconds: float = 0) -> str:
    "Record one run of `key` (every call counts: not idempotent), wait `seconds`, then say so."
    if not key or len(key.encode()) > MAX_KEY_BYTES:
        raise ToolError(f"key must be 1 to {MAX_KEY_BYTES} bytes")
    if not 0 <= seconds <= MAX_SECONDS:
        raise ToolError(f"seconds must be 0 to {MAX_SECONDS}")
    if key not in runs and len(runs) >= MAX_KEYS:
        raise ToolError(f"the ledger is full ({MAX_KEYS} keys)")
    # Counted before the wait: a run cut short still ran.
    runs[key] = runs.get(key, 0) + 1
    await asyncio.sleep(seconds)
    return f"ran {key}"


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def run_ledger() -> dict:
    "How many times each key ran."
    return {"runs": dict(runs)}


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
