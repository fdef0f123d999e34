"""cordon.aio against a real `cordon serve`: the same surface with await, a streamed exec read
with async for (first line before the end, an abandoned stream killing the command), typed
errors, concurrent execs on one client, and a private server started and stopped."""

from __future__ import annotations

import asyncio
import os

import pytest

import cordon
import cordon.aio
from conftest import wait_until


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 600))


def test_aio_private_server_and_session(project, need_ns):
    async def main():
        client = cordon.aio.Client()
        async with client:
            pid = client.server_pid
            assert (await client.health())["status"] == "ok"
            assert any(b["name"] == "ns" for b in await client.backends())
            async with await client.create(env={"V": "1"}) as sb:
                r = await sb.exec(["sh", "-c", "echo $V; cat; exit 4"], stdin="in")
                assert (r.exit_code, r.stdout) == (4, b"1\nin")
                await sb.write("d/f", b"data", mode=0o600)
                assert await sb.ls() == ["d"] and await sb.ls("d") == ["f"]
                assert await sb.read("d/f") == b"data"
                assert (await sb.policy())["user"] == "sandbox"
                snap = await sb.snapshot()
                await sb.shutdown()
                await sb.shutdown()
                with pytest.raises(cordon.Refused) as e:
                    await sb.exec(["true"])
                assert e.value.status == 409
            async with await client.resume(snap) as again:
                assert await again.read("d/f") == b"data"
            assert again.id not in [s["id"] for s in await client.sessions()]
            with pytest.raises(cordon.NotFound):
                await client.sandbox("0123456789abcdef")
            with pytest.raises(cordon.Refused) as e:
                await client.create(no_such_field=True)
            assert e.value.code == "bad_manifest"
            # Many execs at once over the pooled connections.
            async with await client.create() as sb:
                results = await asyncio.gather(*(sb.exec(["echo", str(i)]) for i in range(12)))
                assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(12)]
        return pid

    pid = run(main())
    assert not os.path.exists(f"/proc/{pid}"), "the private server is still there"


def test_aio_stream_first_line_then_abandoned(project, need_ns):
    async def main():
        async with cordon.aio.Client() as client, await client.create() as sb:
            events = []
            async with sb.stream(["sh", "-c", "echo first; while [ ! -e go ]; do sleep 0.05; "
                                  "done; echo last >&2; exit 2"], timeout=300) as stream:
                async for kind, value in stream:
                    events.append((kind, value))
                    if value == b"first\n":
                        await sb.write("go", b"")
            assert events == [("stdout", b"first\n"), ("stderr", b"last\n"), ("exit", 2)]
            assert stream.result.exit_code == 2

            stream = sb.stream(["sh", "-c", ": > ticks; echo started; "
                                "while :; do echo t >> ticks; sleep 0.05; done"], timeout=-1)
            assert await stream.__anext__() == ("stdout", b"started\n")
            await stream.aclose()
            sizes = []
            for _ in range(120):
                sizes.append(len(await sb.read("ticks")))
                if len(sizes) > 10 and sizes[-1] == sizes[-11]:
                    break
                await asyncio.sleep(0.1)
            assert sizes[-1] == sizes[-11], "the command kept running"
            await sb.shutdown()
            with pytest.raises(cordon.Refused):
                async for _ in sb.stream(["true"]):
                    pass

    run(main())


def test_aio_tcp_tokens(tcp_server, need_ns):
    async def main():
        async with cordon.aio.Client(tcp_server.url) as anonymous:
            assert (await anonymous.health())["status"] == "ok"
            with pytest.raises(cordon.Unauthorized) as e:
                await anonymous.backends()
            assert e.value.status == 401
        async with cordon.aio.Client(tcp_server.url, token=tcp_server.token("read")) as reader:
            await reader.backends()
            with pytest.raises(cordon.Unauthorized) as e:
                await reader.create()
            assert (e.value.status, e.value.code) == (403, "forbidden")
        async with cordon.aio.Client(tcp_server.url, token=tcp_server.admin_token) as admin:
            async with await admin.create() as sb:
                assert (await sb.exec(["echo", "tcp"])).stdout == b"tcp\n"
                kinds = [k async for k, _ in sb.stream(["echo", "streamed"])]
                assert kinds == ["stdout", "exit"]
            assert (await admin.verify_audit())["intact"] is True
            assert "sandbox_exec_count_total" in await admin.metrics()

    run(main())
