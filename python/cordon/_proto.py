"""The API's bodies and replies, apart from any I/O: what the sync client (client.py) and the
asyncio twin (aio.py) send and how they read what comes back, so the two cannot drift apart.
The contract is docs/api.md of the cordon repository."""

from __future__ import annotations

import base64
import json
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .errors import CordonError, error_for

# What a caller may give as a command's stdin or a file's contents.
Data = bytes | bytearray | memoryview | str


@dataclass(frozen=True)
class Address:
    """Where a server listens: ``unix`` with ``path``, or ``tcp`` with ``host`` and ``port``."""

    kind: str
    path: str = ""
    host: str = ""
    port: int = 0


def parse_url(url: str) -> Address:
    """``unix:PATH`` (``unix://PATH`` too) or ``http://HOST:PORT`` (as ``cordon serve``
    prints them after "listening on")."""
    if url.startswith("unix:"):
        path = url[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ValueError(f"no socket path in {url!r}")
        return Address("unix", path=path)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"not a cordon serve address (unix:PATH or http://HOST:PORT): {url!r}")
    if parts.path not in ("", "/") or parts.query:
        raise ValueError(f"the address takes no path: {url!r}")
    return Address("tcp", host=parts.hostname, port=parts.port or 80)


def to_bytes(data: Data) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def b64(data: Data) -> str:
    return base64.b64encode(to_bytes(data)).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def size_bytes(value: int | str) -> int:
    """A byte count: an int, or a string with an optional K/M/G/T suffix (powers of 1024),
    as the CLI's ``--memory 512M``."""
    if isinstance(value, bool):
        raise TypeError("a size is an int or a string such as '512M'")
    if isinstance(value, int):
        return value
    m = _SIZE.match(value)
    if not m:
        raise ValueError(f"not a size: {value!r}")
    return int(m.group(1)) * 1024 ** "_kmgt".index((m.group(2) or "_").lower())


def session_manifest(*, backend: str | None, workspace: str | os.PathLike[str] | None,
                     env: Mapping[str, str] | None, net: str | None, ro: Iterable[str],
                     hide: Iterable[str], memory: int | str | None, pids: int | None,
                     timeout_seconds: float | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The body of ``POST /v1/sessions``. ``extra`` holds the manifest's other fields
    (``image``, ``root``, ``repo``, ``files``, ``from``, ``require_enforcement``, ``limits``
    keys such as ``cpus``...) under their API names; ``files`` may map paths to data."""
    body: dict[str, Any] = {}
    if backend is not None:
        body["backend"] = backend
    if workspace is not None:
        body["workspace"] = os.fspath(workspace)
    if env:
        body["env"] = dict(env)
    if net is not None:
        body["net"] = net
    policy: dict[str, Any] = {}
    if ro:
        policy["read_only"] = [str(p) for p in ro]
    if hide:
        policy["hidden"] = [str(p) for p in hide]
    limits: dict[str, Any] = {}
    if memory is not None:
        limits["memory_bytes"] = size_bytes(memory)
    if pids is not None:
        limits["pids"] = pids
    if timeout_seconds is not None:
        body["timeout_seconds"] = timeout_seconds
    for key, value in extra.items():
        if key in ("memory_bytes", "pids", "nofile", "fsize_bytes", "tmp_bytes", "cpus"):
            limits[key] = size_bytes(value) if key.endswith("_bytes") else value
        elif key in ("allow_ro", "read_only", "hidden"):
            policy[key] = [str(p) for p in value]
        elif key == "files" and isinstance(value, Mapping):
            body["files"] = [{"path": p, "content": b64(d)} for p, d in value.items()]
        elif key in ("policy", "limits"):
            (policy if key == "policy" else limits).update(value)
        else:
            body[key] = value
    if policy:
        body["policy"] = policy
    if limits:
        body["limits"] = limits
    return body


def exec_body(argv: Iterable[str], *, cwd: str | None, env: Mapping[str, str] | None,
              timeout: float | None, stdin: Data | None, clear_env: bool = False,
              max_output: int | None = None) -> dict[str, Any]:
    """The body of ``POST /v1/sessions/ID/exec``. ``timeout`` None keeps the session's
    default; a negative one means none."""
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv is a list of strings, never a shell line")
    body: dict[str, Any] = {"argv": [str(a) for a in argv]}
    if not body["argv"]:
        raise ValueError("argv is empty")
    if cwd is not None:
        body["cwd"] = cwd
    if env:
        body["env"] = dict(env)
    if clear_env:
        body["clear_env"] = True
    if timeout is not None:
        body["timeout_seconds"] = timeout
    if stdin is not None:
        body["stdin"] = b64(stdin)
    if max_output is not None:
        body["max_output"] = max_output
    return body


@dataclass(frozen=True)
class ExecResult:
    """What a command did: as ``cordon session exec --json``, with the output as bytes."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    duration_seconds: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    signal: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    exec_failure: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def exec_result(reply: Mapping[str, Any]) -> ExecResult:
    return ExecResult(
        exit_code=int(reply["exit_code"]),
        stdout=unb64(reply.get("stdout")),
        stderr=unb64(reply.get("stderr")),
        duration_seconds=float(reply.get("duration_seconds", 0.0)),
        stdout_truncated=bool(reply.get("stdout_truncated", False)),
        stderr_truncated=bool(reply.get("stderr_truncated", False)),
        signal=int(reply.get("signal", 0)),
        timed_out=bool(reply.get("timed_out", False)),
        oom_killed=bool(reply.get("oom_killed", False)),
        exec_failure=reply.get("exec_failure"),
        raw=dict(reply),
    )


@dataclass(frozen=True)
class Verdict:
    """A selection receipt's verdict, as ``cordon receipt verify``: ``verdict`` is
    ``verified``, ``failed``, ``incomplete``, ``unanchored`` or ``unreadable``."""

    verdict: str
    verified: bool
    reason: str | None = None
    kid: str | None = None
    base: str | None = None
    winner_snapshot: str | None = None
    candidates: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __bool__(self) -> bool:
        return self.verified


def verdict(reply: Mapping[str, Any]) -> Verdict:
    return Verdict(verdict=reply["verdict"], verified=bool(reply.get("verified")),
                   reason=reply.get("reason"), kid=reply.get("kid"), base=reply.get("base"),
                   winner_snapshot=reply.get("winner_snapshot"),
                   candidates=reply.get("candidates"), raw=dict(reply))


def receipt_bytes(receipt: str | os.PathLike[str] | Mapping[str, Any] | bytes) -> bytes:
    """A receipt given as a path, the parsed document or its bytes, as the bytes to send.
    A path is read here (it names a file of the caller, not of the server)."""
    if isinstance(receipt, Mapping):
        # A signed document verifies only in its one canonical spelling (plus a newline).
        return canonical_json(receipt) + b"\n"
    if isinstance(receipt, (bytes, bytearray, memoryview)):
        return bytes(receipt)
    with open(receipt, "rb") as f:
        return f.read()


def _js_number(x: float) -> str:
    """A double as ECMAScript's Number.prototype.toString writes it (RFC 8785 §3.2.2.3)."""
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("NaN and the infinities have no canonical JSON")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    # repr is the shortest decimal that reads back to the same double; only its layout
    # differs from ECMAScript's.
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    point = len(whole) + int(exp or 0) - (len(whole + frac) - len((whole + frac).lstrip("0")))
    digits = digits.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + ("e+" if e > 0 else "e-") + str(abs(e))
    return sign + out


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value, as cordon signs and verifies them (docs/formats.md,
    "Canonical JSON"): members sorted by UTF-16 code units, no whitespace, ECMAScript strings
    and numbers."""

    def enc(v: Any) -> str:
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, int):
            if abs(v) > 2**53:
                raise ValueError(f"an integer beyond 2^53 has no exact canonical JSON: {v}")
            return str(v)
        if isinstance(v, float):
            return _js_number(v)
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, Mapping):
            keys = sorted(v, key=lambda name: str(name).encode("utf-16-be"))
            return "{" + ",".join(enc(str(k)) + ":" + enc(v[k]) for k in keys) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(enc(i) for i in v) + "]"
        raise TypeError(f"not a JSON value: {type(v).__name__}")

    return enc(value).encode("utf-8")


def query(route: str, /, **params: Any) -> str:
    """``route`` with its query string; parameters that are None are left out."""
    kept = {k: v for k, v in params.items() if v is not None}
    return route + ("?" + urllib.parse.urlencode(kept) if kept else "")


def quote_id(ident: str) -> str:
    return urllib.parse.quote(str(ident), safe="")


def error_from_reply(status: int, body: bytes) -> CordonError:
    """The exception for a reply with an error status; a body that is not the API's error
    object still gives one, with the body's start as the message."""
    try:
        err = json.loads(body)["error"]
        return error_for(status, str(err.get("code", "")), str(err.get("message", "")))
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body[:200].decode("utf-8", "replace").strip()
        return error_for(status, "", text or f"HTTP status {status}")


def json_reply(status: int, body: bytes) -> Any:
    """The parsed body of a successful reply."""
    try:
        return json.loads(body) if body else None
    except ValueError as e:
        raise CordonError(f"the server's reply (status {status}) is not JSON: {e}",
                          status=status) from None


def stream_event(line: bytes) -> tuple[str, Any] | None:
    """One line of a streamed exec as an event: ``("stdout", bytes)``, ``("stderr", bytes)``
    or ``("exit", ExecResult)`` (the result without output). An ``error`` line raises; an
    empty line is None."""
    line = line.strip()
    if not line:
        return None
    event = json.loads(line)
    if "stdout" in event:
        return "stdout", unb64(event["stdout"])
    if "stderr" in event:
        return "stderr", unb64(event["stderr"])
    if "exit" in event:
        return "exit", exec_result(event)
    if "error" in event:
        err = event["error"]
        raise CordonError(str(err.get("message", "")), status=200, code=str(err.get("code", "")))
    raise CordonError(f"an unknown event in the exec stream: {line[:200]!r}", status=200)


def entry_names(reply: Mapping[str, Any]) -> list[str]:
    return [e["name"] for e in reply.get("entries", [])]


def race_done(status: Mapping[str, Any], race_id: str, wait: float | None,
              deadline: float | None, now: float) -> bool:
    """One poll of a race, for both clients: True when it is done (fetch the receipt), False
    to poll again; a failed race, or one still running past ``deadline``, raises."""
    if status["status"] == "done":
        return True
    if status["status"] == "failed":
        raise CordonError(status.get("error") or "the race failed", code="race_failed")
    if deadline is not None and now > deadline:
        raise CordonError(f"race {race_id} still runs after {wait:g} s", code="race_running")
    return False


class SandboxInfo:
    """What both clients' sandboxes hold: the session's reply and its routes."""

    def __init__(self, info: Mapping[str, Any]) -> None:
        self.info = dict(info)
        self.id: str = info["id"]
        self.backend: str | None = info.get("backend")
        self.workspace: str | None = info.get("workspace")
        self.root: str | None = info.get("root")
        self.created: str | None = info.get("created")
        self._destroyed = False

    def _path(self, tail: str) -> str:
        return f"/v1/sessions/{quote_id(self.id)}/{tail}"
