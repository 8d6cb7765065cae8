"""Interop check: the real FastMCP client (PyPI `fastmcp-slim[client]` + `fastmcp-tasks`,
versions pinned by scripts/test) against mcpgate speaking 2026-07-28, normally through nginx
in front of three replicas, so every request may reach another replica.

It runs, with FastMCP's own API (no hand-written HTTP):
  1. a task lifecycle: `call_tool_task` of `slow_compute`, `status()` (tasks/get, which
     FastMCP sends without an Mcp-Name header), then `result()`;
  2. a cancellation: a long task cancelled (tasks/cancel), then seen `cancelled`;
  3. a multi-round call (MRTR): `update_work_item` answers `input_required` twice; the
     elicitation handler answers and FastMCP retries with the sealed requestState;
  4. MRTR inside a task: `delete_records` called with `call_tool_task` (which raises unless
     the server answered with a task), seen parked `input_required` through tasks/get with
     the confirmation among its inputRequests, then driven by `result()`: FastMCP answers
     through tasks/update (the elicitation handler is called once) and polls to the result,
     and tasks/get then says `completed`.

Usage: fastmcp_client.py MCP_URL. Prints one line per check and exits non-zero on any
failure; the whole run is bounded by a timeout.
"""

import asyncio
import sys

import fastmcp_tasks  # noqa: F401  (registers the client half of the tasks extension)
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks import call_tool_task

OVERALL_TIMEOUT_S = 90
# How long the task of check 4 may take to ask its question (it asks on its first run).
PARK_TIMEOUT_S = 30

# The questions the elicitation handler answered, by field, in order.
ANSWERED = []


async def answer(message, response_type, params, context):
    """Answers mcpgate's demo questions by the field each one asks."""
    schema = getattr(params, "requested_schema", None) or getattr(params, "requestedSchema", {}) or {}
    fields = set((schema.get("properties") or {}).keys())
    for field, value in (("field", "title"), ("value", "Renamed by FastMCP"), ("confirm", True)):
        if field in fields:
            ANSWERED.append(field)
            return {field: value}
    raise AssertionError(f"unexpected question {message!r} with fields {sorted(fields)}")


def text_of(result):
    return " ".join(getattr(block, "text", "") for block in result.content)


async def run(url: str) -> tuple[int, list[str]]:
    failures = []
    checked = []

    def check(name, ok, detail):
        print(f"{'PASS' if ok else 'FAIL'}: {name}: {detail}", flush=True)
        checked.append(name)
        if not ok:
            failures.append(name)

    client = Client(StreamableHttpTransport(url), elicitation_handler=answer, timeout=30)
    async with client:
        check("modern era negotiated", client.protocol_version == "2026-07-28", client.protocol_version)

        task = await call_tool_task(client, "slow_compute", {"seconds": 0.5, "label": "fastmcp"})
        status = await task.status()
        check("task created and visible", status.status in ("working", "completed"), f"{task.task_id} {status.status}")
        result = await task.result()
        check("task result", text_of(result) == "Computed fastmcp in 0.5 s", text_of(result))

        long = await call_tool_task(client, "slow_compute", {"seconds": 60, "label": "cancel-me"})
        await long.cancel()
        final = await long.status()
        check("task cancelled", final.status == "cancelled", final.status)

        edited = await client.call_tool("update_work_item", {"id": "WI-7"})
        check("MRTR call", "Renamed by FastMCP" in text_of(edited), text_of(edited))

        # call_tool_task raises ToolError when the server answers with anything but a task, so
        # a plain synchronous multi-round call cannot pass this check.
        deleting = await call_tool_task(client, "delete_records", {"table": "logs", "older_than_days": 30})
        parked = await deleting.wait(state="input_required", timeout=PARK_TIMEOUT_S)
        asked = sorted((parked.input_requests or {}).keys())
        check(
            "MRTR in a task: parked for input",
            parked.status == "input_required" and asked != [],
            f"{deleting.task_id} asks {asked}",
        )
        before = len(ANSWERED)
        deleted = await deleting.result()
        answered = ANSWERED[before:]
        done = await deleting.status()
        check(
            "MRTR in a task: answered through tasks/update",
            answered == ["confirm"] and done.status == "completed",
            f"answered {answered}, task {done.status}",
        )
        check(
            "MRTR in a task: result",
            text_of(deleted).startswith("Deleted ") and "from logs" in text_of(deleted),
            text_of(deleted),
        )
    return len(checked), failures


async def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        checked, failures = await asyncio.wait_for(run(sys.argv[1]), OVERALL_TIMEOUT_S)
    except Exception as e:  # any error is a failed interop run, with its cause shown
        print(f"FAIL: FastMCP run aborted: {type(e).__name__}: {e}", flush=True)
        return 1
    passed = checked - len(failures)
    print(f"fastmcp: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
