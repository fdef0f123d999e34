"""The synchronous client: ``Client`` holds the server's address, its token and a pool of
keep-alive connections (so threads may share one client); ``Sandbox`` is one session;
``ExecStream`` one streamed exec on a connection of its own, closed (which kills the command
on the server) when it is abandoned."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from typing import Any, Iterable, Iterator, Mapping

from . import _proto
from ._proto import Data, ExecResult, Verdict
from ._server import PrivateServer
from .errors import CordonError, NotFound

# The errors that mean a kept-alive connection had been closed by the server (idle for 600 s)
# before the request reached it: the request is sent again once, on a new connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("cordon", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec by default
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class Client:
    """A connection to ``cordon serve``.

    ``url`` is ``unix:PATH`` or ``http://HOST:PORT``; None starts a private ``cordon serve
    --socket`` (the binary from ``cordon``, else $CORDON, else PATH) for the project of the
    current directory (or $CORDON_PROJECT), stopped by ``close()``. ``token`` is the bearer
    token a TCP server needs (``cordon token create``). ``timeout`` bounds each socket
    operation (None: no bound, as a long exec needs)."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 timeout: float | None = None, cordon: str | None = None) -> None:
        self._server: PrivateServer | None = None
        if url is None:
            self._server = PrivateServer(cordon)
            url = self._server.url
        self.url = url
        self._address = _proto.parse_url(url)
        self.token = token
        self.timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    # -- plumbing ----------------------------------------------------------------------------

    def _connect(self) -> http.client.HTTPConnection:
        a = self._address
        if a.kind == "unix":
            return _UnixHTTPConnection(a.path, self.timeout)
        return http.client.HTTPConnection(a.host, a.port, timeout=self.timeout)

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if extra:
            headers.update(extra)
        return headers

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        if self._closed:
            raise CordonError("the client is closed")
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(), False

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        """One request; the reply's status and body. An error status raises the matching
        exception (errors.py)."""
        for attempt in (0, 1):
            conn, reused = self._take()
            try:
                conn.request(method, path, body=body, headers=self._headers(headers))
                reply = conn.getresponse()
                data = reply.read()
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
            if reply.will_close:
                conn.close()
            else:
                self._give_back(conn)
            if reply.status >= 400:
                raise _proto.error_from_reply(reply.status, data)
            return reply.status, data
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, obj: Any = None) -> Any:
        body = json.dumps(obj).encode() if obj is not None else None
        status, data = self.request(method, path, body,
                                    {"Content-Type": "application/json"} if body else None)
        return _proto.json_reply(status, data)

    def _open_stream(self, path: str, body: bytes) -> tuple[http.client.HTTPConnection,
                                                              http.client.HTTPResponse]:
        """A request whose reply is read as it arrives, on a connection of its own."""
        if self._closed:
            raise CordonError("the client is closed")
        conn = self._connect()
        try:
            conn.request("POST", path, body=body,
                         headers=self._headers({"Content-Type": "application/json"}))
            reply = conn.getresponse()
        except OSError as e:
            conn.close()
            raise CordonError(f"POST {path}: {e}") from None
        if reply.status >= 400:
            data = reply.read()
            conn.close()
            raise _proto.error_from_reply(reply.status, data)
        return conn, reply

    def close(self) -> None:
        """Close the connections, and stop the private server if this client started one.
        Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def server_pid(self) -> int | None:
        """The private server's pid (None when this client was given an address)."""
        return self._server.proc.pid if self._server is not None else None

    # -- the server --------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok"}``."""
        return self._json("GET", "/healthz")

    def jwks(self) -> dict[str, Any]:
        """The install key's JWKS, as ``cordon key jwks``."""
        return self._json("GET", "/.well-known/jwks.json")

    def metrics(self) -> str:
        """The Prometheus metrics, as text (format 0.0.4)."""
        return self.request("GET", "/metrics")[1].decode()

    def backends(self) -> list[dict[str, Any]]:
        """Every backend: name, origin, availability, tier, capabilities (``cordon backends
        --json``)."""
        return self._json("GET", "/v1/backends")["backends"]

    # -- sessions ----------------------------------------------------------------------------

    def create(self, backend: str | None = "ns", workspace: str | os.PathLike[str] | None = None,
               env: Mapping[str, str] | None = None, net: str | None = "none",
               ro: Iterable[str] = (), hide: Iterable[str] = (), memory: int | str | None = None,
               pids: int | None = None, timeout_seconds: float | None = None,
               **manifest: Any) -> Sandbox:
        """Create a session (``cordon session create``). ``memory`` is bytes or a size such as
        ``"512M"``; other manifest fields go by their API names (``image``, ``root``,
        ``repo``, ``cpus``, ``allow_ro``, ``require_enforcement``, ``files`` as a list or a
        ``{path: data}`` mapping). ``backend`` None is the server's default backend;
        ``net`` None the backend's default class."""
        body = _proto.session_manifest(backend=backend, workspace=workspace, env=env, net=net,
                                       ro=ro, hide=hide, memory=memory, pids=pids,
                                       timeout_seconds=timeout_seconds, extra=manifest)
        return Sandbox(self, self._json("POST", "/v1/sessions", body))

    def resume(self, snapshot_id: str, backend: str | None = "ns", **options: Any) -> Sandbox:
        """A new session whose workspace is the snapshot's tree (``session create --from``);
        ``options`` as for ``create``."""
        options.setdefault("net", "none")
        return self.create(backend=backend, **{"from": snapshot_id}, **options)

    def sandbox(self, session_id: str) -> Sandbox:
        """An existing session (made by this client, another, or the CLI)."""
        return Sandbox(self, self._json("GET", f"/v1/sessions/{_proto.quote_id(session_id)}"))

    def sessions(self) -> list[dict[str, Any]]:
        """Every session of the project, sorted by id."""
        return self._json("GET", "/v1/sessions")["sessions"]

    # -- snapshots, receipts, audit, races ---------------------------------------------------

    def take_snapshot(self, path: str | os.PathLike[str]) -> str:
        """Snapshot a host directory of the server (admin); its id."""
        return self._json("POST", "/v1/snapshots", {"path": os.fspath(path)})["snapshot"]

    def snapshot_entries(self, snapshot_id: str) -> list[dict[str, Any]]:
        """A snapshot's entries in canonical order."""
        return self._json("GET", f"/v1/snapshots/{_proto.quote_id(snapshot_id)}")["entries"]

    def export_snapshot(self, snapshot_id: str) -> bytes:
        """The snapshot's canonical tar image."""
        return self.request("GET", f"/v1/snapshots/{_proto.quote_id(snapshot_id)}/export")[1]

    def import_snapshot(self, tar: Data) -> str:
        """Import a tar image; the snapshot's id."""
        status, data = self.request("POST", "/v1/snapshots/import", _proto.to_bytes(tar))
        return _proto.json_reply(status, data)["snapshot"]

    def verify_receipt(self, receipt: str | os.PathLike[str] | Mapping[str, Any] | bytes,
                       expected_keyid: str | None = None) -> Verdict:
        """Verify a selection receipt (a path, the parsed document or its bytes). Without
        ``expected_keyid`` a good receipt is only ``unanchored``."""
        status, data = self.request(
            "POST", _proto.query("/v1/receipts/verify", expected_keyid=expected_keyid),
            _proto.receipt_bytes(receipt), {"Content-Type": "application/json"})
        return _proto.verdict(_proto.json_reply(status, data))

    def verify_audit(self) -> dict[str, Any]:
        """Verify the project's audit chain (admin)."""
        return self._json("POST", "/v1/audit/verify", {})

    def start_race(self, base: str, k: int, argv: Iterable[str], **options: Any) -> dict[str, Any]:
        """Start a fork-and-race; the reply with its ``id``. ``options`` by their API names
        (``backend``, ``judge``, ``timeout_seconds``, ``allow_no_pass``, ``read_only``,
        ``hidden``, ``protect``)."""
        return self._json("POST", "/v1/races",
                          {"base": base, "k": k, "argv": list(argv), **options})

    def race_status(self, race_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/races/{_proto.quote_id(race_id)}")

    def race_receipt(self, race_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/races/{_proto.quote_id(race_id)}/receipt")

    def race(self, base: str, k: int, argv: Iterable[str], *, poll: float = 0.2,
             wait: float | None = None, **options: Any) -> dict[str, Any]:
        """Run a race to its end and return its signed selection receipt. ``wait`` bounds the
        wait (None: none); a failed race raises CordonError with its message."""
        race_id = self.start_race(base, k, argv, **options)["id"]
        deadline = None if wait is None else time.monotonic() + wait
        while not _proto.race_done(self.race_status(race_id), race_id, wait, deadline,
                                   time.monotonic()):
            time.sleep(poll)
        return self.race_receipt(race_id)


class Sandbox(_proto.SandboxInfo):
    """One session. ``with`` destroys it at the end of the block."""

    def __init__(self, client: Client, info: Mapping[str, Any]) -> None:
        super().__init__(info)
        self.client = client

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, backend={self.backend!r})"

    def exec(self, argv: Iterable[str], cwd: str | None = None,
             env: Mapping[str, str] | None = None, timeout: float | None = None,
             stdin: Data | None = None, *, clear_env: bool = False,
             max_output: int | None = None) -> ExecResult:
        """Run a command (an argv, never a shell line) and wait for it. A failing command is
        an exit code, not an exception. ``timeout`` None: the session's; < 0: none."""
        body = _proto.exec_body(argv, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                                clear_env=clear_env, max_output=max_output)
        return _proto.exec_result(self.client._json("POST", self._path("exec"), body))

    def stream(self, argv: Iterable[str], cwd: str | None = None,
               env: Mapping[str, str] | None = None, timeout: float | None = None,
               stdin: Data | None = None, *, clear_env: bool = False) -> ExecStream:
        """Run a command and iterate over its output as it comes: ``("stdout", bytes)``,
        ``("stderr", bytes)``, then ``("exit", code)`` (``result`` then holds the rest).
        Closing the stream early (``close()``, the end of a ``with``, or dropping it) closes
        the connection, and the server kills the command."""
        body = _proto.exec_body(argv, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                                clear_env=clear_env)
        return ExecStream(*self.client._open_stream(self._path("exec?stream=1"),
                                                    json.dumps(body).encode()))

    def read(self, path: str) -> bytes:
        """A file's bytes (workspace-relative, or absolute under the sandbox root)."""
        return self.client.request("GET", _proto.query(self._path("files"), path=path))[1]

    def write(self, path: str, data: Data, mode: int = 0o644) -> None:
        """Write a file, its parent directories made."""
        self.client.request("PUT", _proto.query(self._path("files"), path=path,
                                                mode=f"{mode:04o}"), _proto.to_bytes(data))

    def ls(self, path: str = ".") -> list[str]:
        """The names in a directory."""
        return _proto.entry_names(self.entries(path))

    def entries(self, path: str = ".") -> dict[str, Any]:
        """A directory's entries with kind, mode and size."""
        return self.client._json("GET", _proto.query(self._path("ls"), path=path))

    def refresh(self) -> dict[str, Any]:
        """The session's state as the server has it now."""
        self.info = self.client._json("GET", f"/v1/sessions/{_proto.quote_id(self.id)}")
        return self.info

    def policy(self) -> dict[str, Any] | None:
        """What the session may touch, as recorded when it was made: ``net``, ``read_only``,
        ``hidden``, ``allow_ro``, ``devices``, ``limits``, ``user``, ``waived`` ... (as
        ``cordon session inspect --json``); None for a session made before it was kept."""
        return self.refresh()["policy"]

    def snapshot(self) -> str:
        """Snapshot the workspace; the snapshot's id (64 hex digits)."""
        return self.client._json("POST", self._path("snapshot"), {})["snapshot"]

    def shutdown(self) -> None:
        """Stop the session's processes; the files stay. Idempotent."""
        self.client._json("POST", self._path("shutdown"), {})

    def destroy(self) -> None:
        """Stop everything and remove the session. Raises NotFound when it is already gone,
        unless this object destroyed it."""
        if self._destroyed:
            return
        self.client._json("DELETE", f"/v1/sessions/{_proto.quote_id(self.id)}")
        self._destroyed = True

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.destroy()
        except NotFound:
            pass


class ExecStream:
    """The events of one streamed exec. Iterate it; ``result`` holds the full ExecResult
    (without output) once the exit event has come."""

    def __init__(self, conn: http.client.HTTPConnection, reply: http.client.HTTPResponse) -> None:
        self._conn: http.client.HTTPConnection | None = conn
        self._reply = reply
        self.result: ExecResult | None = None

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return self

    def __next__(self) -> tuple[str, Any]:
        while self._conn is not None:
            try:
                line = self._reply.readline()
            except OSError as e:
                self.close()
                raise CordonError(f"the exec stream broke: {e}") from None
            if not line:
                self.close()
                raise CordonError("the exec stream ended without an exit event")
            try:
                event = _proto.stream_event(line)
            except BaseException:
                self.close()
                raise
            if event is None:
                continue
            if event[0] == "exit":
                self.result = event[1]
                self.close()
                return "exit", self.result.exit_code
            return event
        raise StopIteration

    def close(self) -> None:
        """Close the connection; a command still running is killed by the server."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._reply.close()
            conn.close()

    def __enter__(self) -> ExecStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
