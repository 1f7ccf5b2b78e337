"""Drive `orchestrator mcp` with the official Python MCP SDK (PyPI `mcp`).

Usage: python mcp_client.py ORCHESTRATOR_BINARY REPO_DIR

Spawns `ORCHESTRATOR_BINARY mcp --repo REPO_DIR` over stdio, then:
  * lists the tools and checks there are exactly the expected names (the reference's 28 and
    the three approval tools);
  * creates a two-job plan with create_copilot_plan and polls it to `succeeded`;
  * builds a plan with scaffold_copilot_plan -> add_copilot_plan_jobs ->
    finalize_copilot_plan and polls it to `succeeded`;
  * checks that an invalid call (get_copilot_plan_status with `{}`) is an error
    result naming the field `planId`.

Exits 0 on success and prints a short summary; the last line of stdout is a JSON
object {"plans": [{"planId", "targetBranch", "files"}...]} for the caller to check
the results in git. Exits non-zero with a message on stderr otherwise.
Works with mcp 1.x (camelCase result attributes) and 2.x (snake_case).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

EXPECTED_TOOLS = {
    "create_copilot_plan",
    "scaffold_copilot_plan",
    "add_copilot_plan_job",
    "add_copilot_plan_jobs",
    "finalize_copilot_plan",
    "get_copilot_plan_status",
    "list_copilot_plans",
    "get_copilot_job_logs",
    "get_copilot_job_attempts",
    "cancel_copilot_plan",
    "pause_copilot_plan",
    "resume_copilot_plan",
    "delete_copilot_plan",
    "archive_copilot_plan",
    "recover_copilot_plan",
    "retry_copilot_plan",
    "reshape_copilot_plan",
    "update_copilot_plan",
    "get_copilot_plan_graph",
    "clone_copilot_plan",
    "get_copilot_job",
    "list_copilot_jobs",
    "retry_copilot_job",
    "force_fail_copilot_job",
    "get_copilot_job_failure_context",
    "update_copilot_plan_job",
    "bulk_update_copilot_plan_jobs",
    "run_copilot_integration_test",
    # Beyond the reference's 28 (SPEC §6, §12).
    "approve_copilot_job",
    "reject_copilot_job",
    "answer_copilot_job",
}
TERMINAL = {"succeeded", "failed", "canceled", "archived"}
POLL_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 30.0


class Failure(Exception):
    """A check that did not hold."""


def check(cond: bool, message: str) -> None:
    if not cond:
        raise Failure(message)


def attr(obj, *names, default=None):
    """The first attribute present among `names` (SDK 2.x snake_case, 1.x camelCase)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return default


def is_error(result) -> bool:
    return bool(attr(result, "is_error", "isError", default=False))


def document(result) -> dict:
    """The structured content of a tool result, else its first text content parsed as JSON."""
    structured = attr(result, "structured_content", "structuredContent")
    if isinstance(structured, dict):
        return structured
    for block in attr(result, "content", default=[]) or []:
        text = getattr(block, "text", None)
        if text is None:
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    raise Failure(f"no structured or JSON text content in {result!r}")


def text_of(result) -> str:
    parts = [getattr(b, "text", "") for b in attr(result, "content", default=[]) or []]
    return " | ".join(p for p in parts if p)


async def call(session: ClientSession, tool: str, args: dict) -> dict:
    """Calls a tool that must succeed; returns its document."""
    result = await session.call_tool(tool, args, read_timeout_seconds=_timeout())
    check(not is_error(result), f"{tool} failed: {text_of(result) or result!r}")
    return document(result)


def _timeout():
    # mcp 1.x takes a timedelta, 2.x a float number of seconds.
    major = int(importlib.metadata.version("mcp").split(".")[0])
    if major < 2:
        from datetime import timedelta

        return timedelta(seconds=CALL_TIMEOUT_S)
    return CALL_TIMEOUT_S


async def list_tool_names(session: ClientSession) -> list[str]:
    """Every tool name, following pagination cursors."""
    names: list[str] = []
    cursor = None
    while True:
        if cursor is None:
            page = await session.list_tools()
        else:
            try:  # mcp 2.x
                from mcp.types import PaginatedRequestParams

                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
            except (ImportError, TypeError):  # mcp 1.x
                page = await session.list_tools(cursor=cursor)
        names.extend(t.name for t in page.tools)
        cursor = attr(page, "next_cursor", "nextCursor")
        if not cursor:
            return names


async def wait_for_success(session: ClientSession, plan: str) -> dict:
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        doc = await call(session, "get_copilot_plan_status", {"planId": plan})
        status = doc.get("status")
        if status in TERMINAL:
            check(status == "succeeded", f"plan {plan} ended {status}: {json.dumps(doc)}")
            return doc
        check(
            time.monotonic() < deadline,
            f"plan {plan} still {status} after {POLL_TIMEOUT_S:.0f}s: {json.dumps(doc)}",
        )
        await asyncio.sleep(0.1)


def job(producer: str, work: str, deps: list[str]) -> dict:
    return {"producerId": producer, "task": producer, "work": work, "dependencies": deps}


async def run(binary: str, repo: str) -> list[dict]:
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--repo", repo],
        # Keep the caller's environment (its HOME and git identity keep git hermetic).
        env=dict(os.environ),
    )
    plans: list[dict] = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            server = attr(init, "server_info", "serverInfo")
            version = attr(init, "protocol_version", "protocolVersion")
            print(f"initialized: server {server.name} {server.version}, protocol {version}")

            # 1. The tools.
            names = await list_tool_names(session)
            check(len(names) == len(set(names)), f"duplicate tool names: {sorted(names)}")
            missing = sorted(EXPECTED_TOOLS - set(names))
            extra = sorted(set(names) - EXPECTED_TOOLS)
            check(
                not missing and not extra and len(names) == len(EXPECTED_TOOLS),
                f"expected the {len(EXPECTED_TOOLS)} tools; missing {missing}, unexpected {extra}",
            )
            print(f"tools: {len(names)}")

            # 2. create_copilot_plan: two shell jobs, the second depending on the first.
            doc = await call(
                session,
                "create_copilot_plan",
                {
                    "name": "python create",
                    "jobs": [
                        job("first", "echo first > first.txt", []),
                        job("second", "cat first.txt > second.txt && echo second >> second.txt", ["first"]),
                    ],
                },
            )
            plan = doc.get("planId")
            check(isinstance(plan, str) and plan, f"create_copilot_plan gave no planId: {doc}")
            done = await wait_for_success(session, plan)
            plans.append(
                {
                    "planId": plan,
                    "targetBranch": done.get("targetBranch"),
                    "files": {"first.txt": "first\n", "second.txt": "first\nsecond\n"},
                }
            )
            print(f"create_copilot_plan: {plan} succeeded")

            # 3. scaffold -> add jobs -> finalize.
            doc = await call(session, "scaffold_copilot_plan", {"name": "python scaffold"})
            scaffolded = doc.get("planId")
            check(isinstance(scaffolded, str) and scaffolded, f"scaffold gave no planId: {doc}")
            check(doc.get("status") == "scaffolding", f"scaffolded plan not scaffolding: {doc}")
            doc = await call(
                session,
                "add_copilot_plan_jobs",
                {
                    "planId": scaffolded,
                    "jobs": [
                        job("base", "echo base > base.txt", []),
                        job("top", "test -f base.txt && echo top > top.txt", ["base"]),
                    ],
                },
            )
            mapping = doc.get("jobMapping") or {}
            check(set(mapping) == {"base", "top"}, f"add_copilot_plan_jobs mapping: {doc}")
            await call(session, "finalize_copilot_plan", {"planId": scaffolded})
            done = await wait_for_success(session, scaffolded)
            plans.append(
                {
                    "planId": scaffolded,
                    "targetBranch": done.get("targetBranch"),
                    "files": {"base.txt": "base\n", "top.txt": "top\n"},
                }
            )
            print(f"scaffold/add_jobs/finalize: {scaffolded} succeeded")

            # 4. An invalid call is an error result naming the field.
            result = await session.call_tool(
                "get_copilot_plan_status", {}, read_timeout_seconds=_timeout()
            )
            check(is_error(result), f"get_copilot_plan_status {{}} did not fail: {result!r}")
            field = document(result).get("field")
            check(field == "planId", f"error names field {field!r}, not planId: {text_of(result)}")
            print("invalid call: isError, field planId")
    return plans


def _leaves(e: BaseException):
    """The exceptions inside (nested) exception groups."""
    subs = getattr(e, "exceptions", None)
    if not subs:
        yield e
        return
    for sub in subs:
        yield from _leaves(sub)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} ORCHESTRATOR_BINARY REPO_DIR", file=sys.stderr)
        return 2
    binary, repo = argv[1], argv[2]
    started = time.monotonic()
    try:
        plans = asyncio.run(run(binary, repo))
    except BaseException as e:  # the SDK's task groups wrap errors in exception groups
        leaves = list(_leaves(e))
        failures = [x for x in leaves if isinstance(x, Failure)]
        for x in failures or leaves:
            label = "" if isinstance(x, Failure) else f"{type(x).__name__}: "
            print(f"FAILED: {label}{x}", file=sys.stderr)
        return 1
    print(
        f"ok: mcp {importlib.metadata.version('mcp')}, {len(plans)} plans succeeded "
        f"in {time.monotonic() - started:.1f}s"
    )
    print(json.dumps({"plans": plans}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
