"""``toolspan mcp proxy`` in front of the official MCP reference servers, with the
official Python client: everything the client sees is what it sees directly.

The servers are the real packages the project's setup installs: the TypeScript
SDK's ``server-everything``, ``server-memory`` and ``server-filesystem`` (npm,
tests/integrations/mcp_servers/) and the Python ``mcp-server-time`` (PyPI).
Each test runs the same client code against the server started directly and
against ``toolspan mcp proxy -- SERVER`` (stdio), or the proxy serving HTTP in
front of the server's own streamable HTTP endpoint, and compares.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.services import free_port, wait_for_port

pytestmark = pytest.mark.slow  # every test starts servers as processes

REPO = Path(__file__).resolve().parents[2]
NPM_BIN = REPO / "tests" / "integrations" / "mcp_servers" / "node_modules" / ".bin"
BIN = Path(sys.executable).parent
RESULT_META_KEY = "toolspan/result"
CLOCK_TIME = re.compile(r"\d{1,2}:\d{2}:\d{2}\s?[AP]M")
LIMIT_S = 60.0  # a hang fails the test instead of holding the suite

Session = Callable[[Client], Awaitable[Any]]


def _npm(name: str) -> str:
    path = NPM_BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed: run scripts/install-node-deps.sh")
    return str(path)


def _proxied(command: list[str], tmp_path: Path, *proxy_args: str) -> list[str]:
    config = tmp_path / "proxy.toml"
    if not config.exists():
        config.write_text("timeout_s = 20\n")
    return [str(BIN / "toolspan"), "mcp", "proxy", "--config", str(config), *proxy_args,
            "--", *command]  # fmt: skip


def _params(command: list[str], env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=command[0], args=command[1:], env={**os.environ, **(env or {})}, cwd=str(REPO)
    )


def _run(params: Any, session: Session, **client_options: Any) -> Any:
    async def main() -> Any:
        with anyio.fail_after(LIMIT_S):
            async with Client(params, mode="legacy", **client_options) as client:
                return await session(client)

    return anyio.run(main)


def _both(
    command: list[str], tmp_path: Path, session: Session, **client_options: Any
) -> tuple[Any, Any]:
    """``session`` against the server directly, then through the proxy."""
    direct = _run(_params(command), session, **client_options)
    proxied = _run(_params(_proxied(command, tmp_path)), session, **client_options)
    return direct, proxied


def _dump(value: Any) -> Any:
    """A result as JSON, toolspan's own ``_meta`` entry taken out (and checked)."""
    dumped = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    meta = dumped.get("_meta")
    if isinstance(meta, dict) and RESULT_META_KEY in meta:
        assert meta.pop(RESULT_META_KEY)["status"] == "succeeded"
        if not meta:
            del dumped["_meta"]
    return dumped


def _steady(dumped: Any) -> Any:
    """A dynamic resource's text names the time it was made: the only difference."""
    return json.loads(CLOCK_TIME.sub("<time>", json.dumps(dumped)))


# -- server-everything (TypeScript SDK) ---------------------------------------------


EVERYTHING_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "hello through the proxy"}),
    ("get-sum", {"a": 2, "b": 40}),
    ("get-tiny-image", {}),  # text, an image block, text
    ("get-annotated-message", {"messageType": "success", "includeImage": True}),
    ("get-resource-links", {"count": 2}),  # resource_link blocks
    ("get-resource-reference", {"resourceType": "Text", "resourceId": 1}),  # embedded resource
    ("get-structured-content", {"location": "Chicago"}),  # outputSchema + structuredContent
]


def _everything() -> list[str]:
    return [_npm("mcp-server-everything"), "stdio"]


def test_everything_lists_the_same_tools_prompts_and_resources(tmp_path):
    async def session(client: Client) -> Any:
        tools = await client.list_tools()
        prompts = await client.list_prompts()
        templates = await client.list_resource_templates()
        return [_dump(tools), _dump(prompts), _dump(templates)]

    direct, proxied = _both(_everything(), tmp_path, session)
    assert proxied == direct
    assert {t["name"] for t in direct[0]["tools"]} >= {name for name, _ in EVERYTHING_CALLS}


@pytest.mark.parametrize(
    ("tool", "arguments"), EVERYTHING_CALLS, ids=[c[0] for c in EVERYTHING_CALLS]
)
def test_every_everything_tool_result_comes_through_unchanged(tmp_path, tool, arguments):
    async def session(client: Client) -> Any:
        return _steady(_dump(await client.call_tool(tool, arguments)))

    direct, proxied = _both(_everything(), tmp_path, session)
    assert proxied == direct
    assert direct.get("isError") is not True


def test_prompts_resources_and_completions_pass_through(tmp_path):
    async def session(client: Client) -> Any:
        from mcp_types import PromptReference

        simple = await client.get_prompt("simple-prompt")
        args = await client.get_prompt("args-prompt", {"city": "Lyon", "state": "Rhône"})
        resource = await client.read_resource("demo://resource/static/document/architecture.md")
        completion = await client.complete(
            PromptReference(type="ref/prompt", name="completable-prompt"),
            {"name": "department", "value": "E"},
        )
        return [_dump(simple), _dump(args), _dump(resource), _dump(completion)]

    direct, proxied = _both(_everything(), tmp_path, session)
    assert proxied == direct
    assert direct[3]["completion"]["values"] == ["Engineering"]


def test_progress_of_a_long_operation_reaches_the_client(tmp_path):
    async def session(client: Client) -> Any:
        seen: list[tuple[float, float | None]] = []

        async def progress(done: float, total: float | None, _message: str | None) -> None:
            seen.append((done, total))

        result = await client.call_tool(
            "trigger-long-running-operation",
            {"duration": 1, "steps": 4},
            progress_callback=progress,
        )
        return _dump(result), seen

    (direct, direct_progress), (proxied, proxied_progress) = _both(_everything(), tmp_path, session)
    assert proxied == direct
    assert proxied_progress == direct_progress == [(n, 4) for n in (1, 2, 3, 4)]


# Handshake-era features (the servers' protocol, 2025-11-25): the SDK warns they are gone in 2026.
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
def test_logging_subscriptions_and_cancellation_pass_through(tmp_path):
    uri = "demo://resource/static/document/architecture.md"

    async def session(client: Client, logs: list[Any], updates: list[str]) -> Any:
        await client.set_logging_level("debug")
        await client.subscribe_resource(uri)
        await client.call_tool("toggle-simulated-logging", {})
        await client.call_tool("toggle-subscriber-updates", {})
        with anyio.fail_after(15):  # each is sent once at once, then every 5 s
            while not (logs and updates):
                await anyio.sleep(0.05)
        # A call the client gives up on: cancelled upstream, and the session goes on.
        with anyio.move_on_after(0.5) as gave_up:
            await client.call_tool("trigger-long-running-operation", {"duration": 30, "steps": 30})
        echoed = await client.call_tool("echo", {"message": "after the cancel"})
        return gave_up.cancelled_caught, echoed.content[0].text

    def run(command: list[str]) -> Any:
        logs: list[Any] = []
        updates: list[str] = []

        async def on_log(params: Any) -> None:
            logs.append(params)

        async def on_message(message: Any) -> None:
            root = getattr(message, "root", message)
            if getattr(root, "method", None) == "notifications/resources/updated":
                updates.append(root.params.uri)

        result = _run(
            _params(command),
            lambda client: session(client, logs, updates),
            logging_callback=on_log,
            message_handler=on_message,
        )
        return result, {type(log.data).__name__ for log in logs}, set(updates)

    direct = run(_everything())
    proxied = run(_proxied(_everything(), tmp_path))
    assert proxied == direct
    assert proxied[0] == (True, "Echo: after the cancel") and proxied[2] == {uri}


def test_the_server_gets_the_environment_the_client_config_sets(tmp_path):
    # What an MCP client's config sets in `env` for the wrapped server lands on
    # the proxy's process: the server needs it (its API tokens).
    async def session(client: Client) -> Any:
        result = await client.call_tool("get-env", {})
        return json.loads(result.content[0].text)

    env = {"LEDGER": "ledger-7", "PAYMENTS_TOKEN": "tok-123"}
    proxied = _run(_params(_proxied(_everything(), tmp_path), env), session)
    assert {k: proxied.get(k) for k in env} == env


# -- server-memory and server-filesystem (TypeScript SDK) -----------------------------


def test_memory_writes_and_reads_the_same_graph(tmp_path):
    async def session(client: Client) -> Any:
        entity = {"name": "Ada", "entityType": "person", "observations": ["wrote programs"]}
        created = await client.call_tool("create_entities", {"entities": [entity]})
        graph = await client.call_tool("read_graph", {})
        return [_dump(created), _dump(graph)]

    results = []
    for name, wrap in (("direct", False), ("proxied", True)):
        command = [_npm("mcp-server-memory")]
        store = tmp_path / f"{name}-memory.jsonl"
        launched = _proxied(command, tmp_path) if wrap else command
        results.append(_run(_params(launched, {"MEMORY_FILE_PATH": str(store)}), session))
        assert "wrote programs" in store.read_text()
    direct, proxied = results
    assert proxied == direct
    assert "Ada" in json.dumps(direct[1])


def test_filesystem_lists_and_reads_as_directly(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    (root / "notes.txt").write_text("first line\nsecond line\n")
    (root / "sub").mkdir()

    async def session(client: Client) -> Any:
        tools = await client.list_tools()
        listing = await client.call_tool("list_directory", {"path": str(root)})
        text = await client.call_tool("read_text_file", {"path": str(root / "notes.txt")})
        return [_dump(tools), _dump(listing), _dump(text)]

    direct, proxied = _both([_npm("mcp-server-filesystem"), str(root)], tmp_path, session)
    assert proxied == direct
    assert "second line" in json.dumps(direct[2])


# -- mcp-server-time (Python SDK) ----------------------------------------------------


def test_the_python_time_server_answers_the_same(tmp_path):
    async def session(client: Client) -> Any:
        tools = await client.list_tools()
        converted = await client.call_tool(
            "convert_time",
            {"source_timezone": "Europe/Paris", "time": "09:30", "target_timezone": "Asia/Tokyo"},
        )
        return [_dump(tools), _dump(converted)]

    command = [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
    direct, proxied = _both(command, tmp_path, session)
    assert proxied == direct
    assert "Asia/Tokyo" in json.dumps(direct[1])


# -- HTTP on both sides, several clients at once ------------------------------------


@pytest.fixture
def everything_over_http() -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [_npm("mcp-server-everything"), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, timeout_s=30)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_several_http_clients_at_once_through_one_proxy(tmp_path, everything_over_http):
    port = free_port()
    config = tmp_path / "proxy.toml"
    config.write_text("timeout_s = 20\n")
    proxy = subprocess.Popen(
        [str(BIN / "toolspan"), "mcp", "proxy", "--config", str(config), "--serve", "http",
         "--port", str(port), "--upstream", everything_over_http],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, timeout_s=30)

        async def one(url: str, n: int) -> Any:
            async with Client(url, mode="legacy") as client:
                tools = await client.list_tools()
                echoed = await client.call_tool("echo", {"message": f"client {n}"})
                image = await client.call_tool("get-tiny-image", {})
                return _dump(tools), _dump(echoed), _dump(image)

        async def main(url: str) -> list[Any]:
            results: list[Any] = [None] * 3
            with anyio.fail_after(LIMIT_S):
                async with anyio.create_task_group() as group:
                    for n in range(3):

                        async def run(n: int = n) -> None:
                            results[n] = await one(url, n)

                        group.start_soon(run)
            return results

        direct = anyio.run(main, everything_over_http)
        proxied = anyio.run(main, f"http://127.0.0.1:{port}/mcp")
    finally:
        proxy.terminate()
        proxy.wait(timeout=20)
    assert proxied == direct
    assert [r[1]["content"][0]["text"] for r in proxied] == [f"Echo: client {n}" for n in range(3)]
