"""Stopping ``toolspan mcp proxy`` stops the server it started, whenever it is stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # processes

SERVER = Path(__file__).with_name("hostile_mcp_server.py")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_in_the_servers_grace_period_stops_the_server_too():
    # The client closes its side, then sends SIGTERM before the 2 s grace is over
    # (as desktop clients do); the server is slow to go.
    proxy = subprocess.Popen(
        [sys.executable, "-m", "toolspan.cli", "mcp", "proxy", "--",
         sys.executable, str(SERVER), "tools", "linger"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proxy.stdin is not None and proxy.stdout is not None
    proxy.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    proxy.stdin.flush()
    assert json.loads(proxy.stdout.readline())["id"] == 1  # the server is up
    (server,) = _children(proxy.pid)
    proxy.stdin.close()
    time.sleep(0.3)  # the proxy has seen the end of its input: the server's grace runs
    proxy.send_signal(signal.SIGTERM)
    assert proxy.wait(timeout=10) == 0
    deadline = time.monotonic() + 5
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(server), "the server outlived the proxy"
    finally:
        if _alive(server):
            os.kill(server, signal.SIGKILL)
