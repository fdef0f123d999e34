"""The asyncio twin of the client: the same surface as ``cordon.Client`` and ``Sandbox`` with
``await``, and ``async for`` over a streamed exec. HTTP/1.1 is spoken here over asyncio
streams (unix socket or TCP), kept-alive connections pooled per client; the bodies and the
reading of replies are the sync client's (_proto.py).

    async with cordon.aio.Client() as client:
        async with await client.create() as sb:
            result = await sb.exec(["echo", "hi"])
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Iterable, Mapping

from . import _proto
from ._proto import Data, ExecResult, Verdict
from ._server import PrivateServer
from .errors import CordonError, NotFound

_STALE = (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError)


class _Reply:
    """A reply's status and headers; its body is read by ``read()`` or ``chunks()``."""

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str]) -> None:
        self._conn = conn
        self.status = status
        self.headers = headers
        self.will_close = headers.get("connection", "").lower() == "close"

    async def chunks(self):
        r = self._conn.reader
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await r.readline()
                if not size_line:
                    raise asyncio.IncompleteReadError(b"", None)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await r.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                data = await r.readexactly(size)
                await r.readexactly(2)
                yield data
        elif "content-length" in self.headers:
            left = int(self.headers["content-length"])
            if left:
                yield await r.readexactly(left)
        else:
            self.will_close = True
            while data := await r.read(65536):
                yield data

    async def read(self) -> bytes:
        return b"".join([c async for c in self.chunks()])


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 host: str) -> None:
        self.reader = reader
        self.writer = writer
        self.host = host

    @classmethod
    async def open(cls, address: _proto.Address) -> _Conn:
        try:
            if address.kind == "unix":
                r, w = await asyncio.open_unix_connection(address.path)
                return cls(r, w, "cordon")
            r, w = await asyncio.open_connection(address.host, address.port)
            return cls(r, w, f"{address.host}:{address.port}")
        except OSError as e:
            raise CordonError(f"cannot connect: {e}") from None

    async def send(self, method: str, path: str, body: bytes | None,
                   headers: Mapping[str, str]) -> _Reply:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}",
                 f"Content-Length: {len(body or b'')}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        parts = status_line.decode("latin-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise CordonError(f"not an HTTP reply: {status_line[:100]!r}")
        reply_headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b"\n"):
            if not line:
                raise ConnectionResetError("the server closed the connection")
            name, _, value = line.decode("latin-1").partition(":")
            reply_headers[name.strip().lower()] = value.strip()
        return _Reply(self, int(parts[1]), reply_headers)

    def close(self) -> None:
        self.writer.close()


class Client:
    """The asyncio ``cordon.Client``: the same arguments. A private server (``url`` None) is
    started by ``async with`` or the first request, and stopped by ``aclose()``."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 cordon: str | None = None) -> None:
        self.url = url
        self.token = token
        self._cordon = cordon
        self._server: PrivateServer | None = None
        self._address = _proto.parse_url(url) if url is not None else None
        self._idle: list[_Conn] = []
        self._closed = False
        self._starting = asyncio.Lock()

    @property
    def server_pid(self) -> int | None:
        return self._server.proc.pid if self._server is not None else None

    async def _addr(self) -> _proto.Address:
        if self._address is None:
            async with self._starting:
                if self._address is None:
                    self._server = await asyncio.to_thread(PrivateServer, self._cordon)
                    self.url = self._server.url
                    self._address = _proto.parse_url(self.url)
        return self._address

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra or {})
        return headers

    async def _take(self) -> tuple[_Conn, bool]:
        if self._closed:
            raise CordonError("the client is closed")
        if self._idle:
            return self._idle.pop(), True
        return await _Conn.open(await self._addr()), False

    async def request(self, method: str, path: str, body: bytes | None = None,
                      headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        """One request; its status and body. An error status raises (errors.py)."""
        for attempt in (0, 1):
            conn, reused = await self._take()
            try:
                reply = await conn.send(method, path, body, self._headers(headers))
                data = await reply.read()
            except _STALE:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise CordonError(f"{method} {path}: the server closed the connection") from None
            except OSError as e:
                conn.close()
                raise CordonError(f"{method} {path}: {e}") from None
            except BaseException:
                conn.close()
                raise
            if reply.will_close or self._closed:
                conn.close()
            else:
                self._idle.append(conn)
            if reply.status >= 400:
                raise _proto.error_from_reply(reply.status, data)
            return reply.status, data
        raise AssertionError("unreachable")

    async def _json(self, method: str, path: str, obj: Any = None) -> Any:
        body = json.dumps(obj).encode() if obj is not None else None
        status, data = await self.request(method, path, body,
                                          {"Content-Type": "application/json"} if body else None)
        return _proto.json_reply(status, data)

    async def aclose(self) -> None:
        """Close the connections and stop a private server. Idempotent."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._server is not None:
            server, self._server = self._server, None
            await asyncio.to_thread(server.stop)

    async def __aenter__(self) -> Client:
        await self._addr()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def health(self) -> dict[str, Any]:
        return await self._json("GET", "/healthz")

    async def jwks(self) -> dict[str, Any]:
        return await self._json("GET", "/.well-known/jwks.json")

    async def metrics(self) -> str:
        return (await self.request("GET", "/metrics"))[1].decode()

    async def backends(self) -> list[dict[str, Any]]:
        return (await self._json("GET", "/v1/backends"))["backends"]

    async def create(self, backend: str | None = "ns",
                     workspace: str | os.PathLike[str] | None = None,
                     env: Mapping[str, str] | None = None, net: str | None = "none",
                     ro: Iterable[str] = (), hide: Iterable[str] = (),
                     memory: int | str | None = None, pids: int | None = None,
                     timeout_seconds: float | None = None, **manifest: Any) -> Sandbox:
        """As ``cordon.Client.create``."""
        body = _proto.session_manifest(backend=backend, workspace=workspace, env=env, net=net,
                                       ro=ro, hide=hide, memory=memory, pids=pids,
                                       timeout_seconds=timeout_seconds, extra=manifest)
        return Sandbox(self, await self._json("POST", "/v1/sessions", body))

    async def resume(self, snapshot_id: str, backend: str | None = "ns",
                     **options: Any) -> Sandbox:
        options.setdefault("net", "none")
        return await self.create(backend=backend, **{"from": snapshot_id}, **options)

    async def sandbox(self, session_id: str) -> Sandbox:
        return Sandbox(self, await self._json("GET",
                                              f"/v1/sessions/{_proto.quote_id(session_id)}"))

    async def sessions(self) -> list[dict[str, Any]]:
        return (await self._json("GET", "/v1/sessions"))["sessions"]

    async def take_snapshot(self, path: str | os.PathLike[str]) -> str:
        return (await self._json("POST", "/v1/snapshots", {"path": os.fspath(path)}))["snapshot"]

    async def snapshot_entries(self, snapshot_id: str) -> list[dict[str, Any]]:
        return (await self._json("GET", f"/v1/snapshots/{_proto.quote_id(snapshot_id)}"))[
            "entries"]

    async def export_snapshot(self, snapshot_id: str) -> bytes:
        return (await self.request("GET",
                                   f"/v1/snapshots/{_proto.quote_id(snapshot_id)}/export"))[1]

    async def import_snapshot(self, tar: Data) -> str:
        status, data = await self.request("POST", "/v1/snapshots/import", _proto.to_bytes(tar))
        return _proto.json_reply(status, data)["snapshot"]

    async def verify_receipt(self, receipt: str | os.PathLike[str] | Mapping[str, Any] | bytes,
                             expected_keyid: str | None = None) -> Verdict:
        status, data = await self.request(
            "POST", _proto.query("/v1/receipts/verify", expected_keyid=expected_keyid),
            _proto.receipt_bytes(receipt), {"Content-Type": "application/json"})
        return _proto.verdict(_proto.json_reply(status, data))

    async def verify_audit(self) -> dict[str, Any]:
        return await self._json("POST", "/v1/audit/verify", {})

    async def start_race(self, base: str, k: int, argv: Iterable[str],
                         **options: Any) -> dict[str, Any]:
        return await self._json("POST", "/v1/races",
                                {"base": base, "k": k, "argv": list(argv), **options})

    async def race_status(self, race_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/races/{_proto.quote_id(race_id)}")

    async def race_receipt(self, race_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/races/{_proto.quote_id(race_id)}/receipt")

    async def race(self, base: str, k: int, argv: Iterable[str], *, poll: float = 0.2,
                   wait: float | None = None, **options: Any) -> dict[str, Any]:
        """As ``cordon.Client.race``: run to the end, return the signed receipt."""
        race_id = (await self.start_race(base, k, argv, **options))["id"]
        deadline = None if wait is None else time.monotonic() + wait
        while not _proto.race_done(await self.race_status(race_id), race_id, wait, deadline,
                                   time.monotonic()):
            await asyncio.sleep(poll)
        return await self.race_receipt(race_id)


class Sandbox(_proto.SandboxInfo):
    """The asyncio ``cordon.Sandbox``; ``async with`` destroys it at the end."""

    def __init__(self, client: Client, info: Mapping[str, Any]) -> None:
        super().__init__(info)
        self.client = client

    def __repr__(self) -> str:
        return f"aio.Sandbox(id={self.id!r}, backend={self.backend!r})"

    async def exec(self, argv: Iterable[str], cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None,
                   stdin: Data | None = None, *, clear_env: bool = False,
                   max_output: int | None = None) -> ExecResult:
        body = _proto.exec_body(argv, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                                clear_env=clear_env, max_output=max_output)
        return _proto.exec_result(await self.client._json("POST", self._path("exec"), body))

    def stream(self, argv: Iterable[str], cwd: str | None = None,
               env: Mapping[str, str] | None = None, timeout: float | None = None,
               stdin: Data | None = None, *, clear_env: bool = False) -> ExecStream:
        """``async for kind, value in sb.stream(argv)``; ``aclose()`` (or the end of an
        ``async with``) before the exit event kills the command."""
        body = _proto.exec_body(argv, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                                clear_env=clear_env)
        return ExecStream(self.client, self._path("exec?stream=1"), json.dumps(body).encode())

    async def read(self, path: str) -> bytes:
        return (await self.client.request("GET", _proto.query(self._path("files"), path=path)))[1]

    async def write(self, path: str, data: Data, mode: int = 0o644) -> None:
        await self.client.request("PUT", _proto.query(self._path("files"), path=path,
                                                      mode=f"{mode:04o}"), _proto.to_bytes(data))

    async def ls(self, path: str = ".") -> list[str]:
        return _proto.entry_names(await self.entries(path))

    async def entries(self, path: str = ".") -> dict[str, Any]:
        return await self.client._json("GET", _proto.query(self._path("ls"), path=path))

    async def policy(self) -> dict[str, Any] | None:
        self.info = await self.client._json("GET", f"/v1/sessions/{_proto.quote_id(self.id)}")
        return self.info["policy"]

    async def snapshot(self) -> str:
        return (await self.client._json("POST", self._path("snapshot"), {}))["snapshot"]

    async def shutdown(self) -> None:
        await self.client._json("POST", self._path("shutdown"), {})

    async def destroy(self) -> None:
        if self._destroyed:
            return
        await self.client._json("DELETE", f"/v1/sessions/{_proto.quote_id(self.id)}")
        self._destroyed = True

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.destroy()
        except NotFound:
            pass


class ExecStream:
    """One streamed exec on a connection of its own, opened at the first ``__anext__``."""

    def __init__(self, client: Client, path: str, body: bytes) -> None:
        self._client = client
        self._path = path
        self._body = body
        self._conn: _Conn | None = None
        self._chunks = None
        self._buf = b""
        self._done = False
        self.result: ExecResult | None = None

    def __aiter__(self) -> ExecStream:
        return self

    async def _open(self) -> None:
        if self._client._closed:
            raise CordonError("the client is closed")
        self._conn = await _Conn.open(await self._client._addr())
        try:
            reply = await self._conn.send("POST", self._path, self._body,
                                          self._client._headers(
                                              {"Content-Type": "application/json"}))
            if reply.status >= 400:
                raise _proto.error_from_reply(reply.status, await reply.read())
        except BaseException:
            await self.aclose()
            raise
        self._chunks = reply.chunks()

    async def __anext__(self) -> tuple[str, Any]:
        if self._done:
            raise StopAsyncIteration
        if self._conn is None:
            await self._open()
        try:
            while True:
                line, sep, rest = self._buf.partition(b"\n")
                if sep:
                    self._buf = rest
                    event = _proto.stream_event(line)
                    if event is None:
                        continue
                    if event[0] == "exit":
                        self.result = event[1]
                        await self.aclose()
                        return "exit", self.result.exit_code
                    return event
                try:
                    self._buf += await self._chunks.__anext__()
                except StopAsyncIteration:
                    raise CordonError("the exec stream ended without an exit event") from None
                except (OSError, asyncio.IncompleteReadError) as e:
                    raise CordonError(f"the exec stream broke: {e}") from None
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Close the connection; a command still running is killed by the server."""
        self._done = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            try:
                await conn.writer.wait_closed()
            except OSError:
                pass

    async def __aenter__(self) -> ExecStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
