"""The SDK's pure parts (no server): addresses, request bodies, replies, errors, and the
canonical JSON a receipt is sent in."""

from __future__ import annotations

import pytest

import cordon
from cordon import _proto


def test_addresses():
    assert _proto.parse_url("unix:/run/x.sock") == _proto.Address("unix", path="/run/x.sock")
    assert _proto.parse_url("unix:///run/x.sock").path == "/run/x.sock"
    a = _proto.parse_url("http://127.0.0.1:4123")
    assert (a.kind, a.host, a.port) == ("tcp", "127.0.0.1", 4123)


def test_manifest_and_exec_bodies():
    body = _proto.session_manifest(backend="ns", workspace=None, env={"A": "1"}, net="none",
                                   ro=["r"], hide=["h"], memory="512M", pids=64,
                                   timeout_seconds=30, extra={"cpus": 1.5, "files": {"f": b"x"},
                                                              "image": "img"})
    assert body == {"backend": "ns", "env": {"A": "1"}, "net": "none",
                    "policy": {"read_only": ["r"], "hidden": ["h"]},
                    "limits": {"memory_bytes": 512 << 20, "pids": 64, "cpus": 1.5},
                    "timeout_seconds": 30, "files": [{"path": "f", "content": "eA=="}],
                    "image": "img"}
    assert _proto.exec_body(["a", "b"], cwd=None, env=None, timeout=None, stdin=None) == {
        "argv": ["a", "b"]}
    assert _proto.exec_body(["a"], cwd="d", env={"X": "y"}, timeout=-1, stdin="hi")["stdin"] \
        == "aGk="
    with pytest.raises(ValueError):
        _proto.size_bytes("12Q")


def test_error_mapping():
    def err(status, code):
        return _proto.error_from_reply(status, b'{"error":{"code":"%s","message":"m"}}' % code)
    assert type(err(404, b"not_found")) is cordon.NotFound
    assert type(err(401, b"unauthorized")) is cordon.Unauthorized
    assert type(err(403, b"forbidden")) is cordon.Unauthorized
    assert type(err(403, b"forbidden_peer")) is cordon.Unauthorized
    assert type(err(403, b"denied")) is cordon.Refused
    assert type(err(409, b"shut_down")) is cordon.Refused
    assert type(err(500, b"internal")) is cordon.CordonError
    e = _proto.error_from_reply(502, b"<html>bad gateway</html>")
    assert e.status == 502 and "bad gateway" in e.message


def test_stream_events():
    assert _proto.stream_event(b'{"stdout":"YQo="}\n') == ("stdout", b"a\n")
    kind, result = _proto.stream_event(b'{"exit":3,"exit_code":3,"duration_seconds":0.5}')
    assert kind == "exit" and result.exit_code == 3
    with pytest.raises(cordon.CordonError) as e:
        _proto.stream_event(b'{"error":{"code":"exec_failed","message":"m"}}')
    assert e.value.code == "exec_failed"


@pytest.mark.parametrize("value,text", [
    (1e21, "1e+21"), (1e-7, "1e-7"), (123.0, "123"), (0.000001, "0.000001"), (0.1, "0.1"),
    (-2.5, "-2.5"), (333333333.3333333, "333333333.3333333"), (4.5e-5, "0.000045"),
    (2e23, "2e+23"), (1.25e20, "125000000000000000000"), (-0.0, "0"), (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"), (9007199254740992.0, "9007199254740992"),
])
def test_canonical_numbers(value, text):  # RFC 8785 Appendix B's layouts
    assert _proto.canonical_json(value) == text.encode()


def test_canonical_objects_and_strings():
    doc = {"b": [1, "\u0001\"\\\u00e9\u007f/"], "a": None, "\U00010000": True, "\ue000": False}
    assert _proto.canonical_json(doc) == (
        '{"a":null,"b":[1,"\\u0001\\"\\\\\u00e9\u007f/"],"\U00010000":true,"\ue000":false}'
    ).encode()
    with pytest.raises(ValueError):
        _proto.canonical_json(float("nan"))
