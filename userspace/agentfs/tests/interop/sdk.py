"""Drives the reference AgentFS SDK (PyPI agentfs-sdk) for tests/interop.rs.

usage: sdk.py read DB       -> prints what the SDK sees in a ClawOS workspace, as JSON
       sdk.py write DB      -> fills a fresh workspace through the SDK
       sdk.py cat DB PATH   -> prints the file PATH as the SDK reads it

Every workspace is opened the way the SDK's users open one,
AgentFS.open(AgentFSOptions(path=...)), with no engine option.
"""

import asyncio
import json
import sys

from agentfs_sdk import AgentFS, AgentFSOptions


async def open_workspace(path):
    return await AgentFS.open(AgentFSOptions(path=path))


async def read(path):
    agent = await open_workspace(path)
    db = agent.get_database()
    link_stat = await agent.fs.stat("/docs/link")
    cursor = await db.execute(
        "SELECT s.target FROM fs_symlink s JOIN fs_dentry d ON d.ino = s.ino WHERE d.name = 'link'"
    )
    (target,) = await cursor.fetchone()
    cursor = await db.execute(
        "SELECT name, parameters, result, error, duration_ms FROM tool_calls ORDER BY id"
    )
    calls = [list(row) for row in await cursor.fetchall()]
    out = {
        "root": await agent.fs.readdir("/"),
        "docs": await agent.fs.readdir("/docs"),
        "readme": await agent.fs.read_file("/docs/readme"),
        "big_len": len(await agent.fs.read_file("/big.bin", encoding=None)),
        "link_mode": link_stat.mode,
        "link_target": target,
        "kv": await agent.kv.get("config"),
        "calls": calls,
    }
    await agent.close()
    print(json.dumps(out))


async def write(path):
    agent = await open_workspace(path)
    await agent.fs.mkdir("/notes")
    await agent.fs.write_file("/notes/todo.txt", "from the sdk")
    await agent.fs.write_file("/blob.bin", bytes(range(256)) * 40)
    await agent.kv.set("session", {"user": "ada", "turn": 3})
    await agent.tools.record("search", 1700000000, 1700000002, {"q": "x"}, {"hits": 2})
    await agent.close()


async def cat(path, file):
    agent = await open_workspace(path)
    sys.stdout.write(await agent.fs.read_file(file))
    await agent.close()


if __name__ == "__main__":
    command, path, *rest = sys.argv[1:]
    asyncio.run({"read": read, "write": write, "cat": cat}[command](path, *rest))
