"""The synchronous SDK against a real `cordon serve`: every route through cordon.Client and
cordon.Sandbox, the error paths as typed exceptions (400, 401, 403, 404, 405, 409), a
streamed exec whose first line arrives before the command ends, an abandoned stream that
kills its command, and Client(None)'s private server started and stopped."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

import cordon
from conftest import run_cordon, wait_until


def test_private_server_starts_and_stops(project):
    c = cordon.Client()
    pid = c.server_pid
    assert c.url.startswith("unix:")
    sock = c.url[len("unix:"):]
    assert os.path.exists(sock)
    assert c.health() == {"status": "ok"}
    assert any(b["name"] == "ns" for b in c.backends())
    c.close()
    c.close()  # idempotent
    assert not os.path.exists(f"/proc/{pid}"), "the private server is still there"
    assert not os.path.exists(os.path.dirname(sock))
    with pytest.raises(cordon.CordonError):
        c.health()


def test_private_server_without_a_binary_is_an_error(project, monkeypatch):
    monkeypatch.setenv("CORDON", str(project / "no-such-cordon"))
    with pytest.raises(cordon.CordonError):
        cordon.Client()


def test_bad_addresses_are_refused_before_any_connection():
    for url in ("ftp://x", "unix:", "http://127.0.0.1:1/v1"):
        with pytest.raises(ValueError):
            cordon.Client(url)


def test_session_exec_files_ls(client, need_ns):
    with client.create(env={"GREETING": "hi"}, memory="256M", pids=128,
                       timeout_seconds=120) as sb:
        assert sb.backend == "ns"
        r = sb.exec(["sh", "-c", 'echo "$GREETING $EXTRA"; echo oops >&2; exit 3'],
                    env={"EXTRA": "there"})
        assert (r.exit_code, r.stdout, r.stderr) == (3, b"hi there\n", b"oops\n")
        assert r.duration_seconds > 0 and not r.stdout_truncated and not r.stderr_truncated
        r = sb.exec(["cat"], stdin=b"\x00\xffbinary")
        assert r.stdout == b"\x00\xffbinary"
        r = sb.exec(["head", "-c", "100000", "/dev/zero"], max_output=1000)
        assert r.stdout_truncated and len(r.stdout) == 1000 and r.raw["stdout_bytes"] == 100000
        r = sb.exec(["sleep", "30"], timeout=1)
        assert r.timed_out and r.exit_code == 137
        r = sb.exec(["no-such-command-here"])
        assert r.exit_code == 127 and r.exec_failure == "not_found"

        sb.write("dir/a.txt", b"contents\n", mode=0o600)
        sb.write("b.txt", "text")
        assert sb.read("dir/a.txt") == b"contents\n"
        assert sorted(sb.ls()) == ["b.txt", "dir"]
        assert sb.ls("dir") == ["a.txt"]
        [entry] = sb.entries("dir")["entries"]
        assert (entry["kind"], entry["mode"], entry["size"]) == ("file", "0600", 9)
        assert sb.exec(["cat", "a.txt"], cwd="dir").stdout == b"contents\n"

        again = client.sandbox(sb.id[:10])
        assert again.id == sb.id and again.created == sb.created and sb.created.endswith("Z")
        assert sb.id in [s["id"] for s in client.sessions()]
        assert sb.refresh()["shut_down"] is False
        # The CLI sees the API's session.
        assert run_cordon("session", "exec", sb.id, "--", "cat", "b.txt") == "text"


def test_policy_read_only_and_hidden(client, need_ns, tmp_path):
    with client.create(files={"locked/f": b"keep", "secret/key": b"s3cret"},
                       ro=["locked"], hide=["secret"]) as sb:
        r = sb.exec(["sh", "-c", "echo x > locked/f"])
        assert r.exit_code != 0
        assert sb.read("locked/f") == b"keep"
        r = sb.exec(["cat", "secret/key"])
        assert r.exit_code != 0 and b"s3cret" not in r.stdout
        # What the session says it may touch is what was asked, and held above.
        policy = sb.policy()
        assert (policy["read_only"], policy["hidden"], policy["waived"]) == (["locked"],
                                                                             ["secret"], [])


def test_snapshot_resume_shutdown_destroy(client, need_ns):
    sb = client.create()
    sb.write("state.txt", b"v1")
    snap = sb.snapshot()
    assert len(snap) == 64
    sb.write("state.txt", b"v2")
    sb.shutdown()
    sb.shutdown()  # idempotent
    with pytest.raises(cordon.Refused) as e:
        sb.exec(["true"])
    assert (e.value.status, e.value.code) == (409, "shut_down")
    with pytest.raises(cordon.Refused) as e:
        sb.write("x", b"")
    assert e.value.status == 409
    sb.destroy()
    sb.destroy()  # this handle destroyed it: nothing more to do
    with pytest.raises(cordon.NotFound):
        client.sandbox(sb.id)
    stale = cordon.Sandbox(client, {"id": sb.id})
    with pytest.raises(cordon.NotFound):
        stale.destroy()
    with client.resume(snap) as resumed:
        assert resumed.read("state.txt") == b"v1"
    assert resumed.id not in [s["id"] for s in client.sessions()]


def test_stream_delivers_the_first_line_before_the_command_ends(client, need_ns):
    with client.create() as sb:
        # The command cannot end before the test writes `go`, which it does only once the
        # first line has arrived.
        stream = sb.stream(["sh", "-c", "echo first; echo warn >&2; "
                            "while [ ! -e go ]; do sleep 0.05; done; echo last"], timeout=300)
        with stream:
            assert next(stream) == ("stdout", b"first\n")
            assert next(stream) == ("stderr", b"warn\n")
            sb.write("go", b"")
            rest = list(stream)
        assert rest == [("stdout", b"last\n"), ("exit", 0)]
        assert stream.result.exit_code == 0 and stream.result.duration_seconds > 0
        events = list(sb.stream(["sh", "-c", "exit 7"]))
        assert events == [("exit", 7)]


def test_an_abandoned_stream_kills_the_command(client, need_ns):
    with client.create() as sb:
        stream = sb.stream(["sh", "-c", ": > ticks; echo started; "
                            "while :; do echo tick >> ticks; sleep 0.05; done"], timeout=-1)
        assert next(stream) == ("stdout", b"started\n")
        assert wait_until(lambda: sb.exec(["test", "-s", "ticks"]).exit_code == 0)
        del stream  # dropped mid-way: the connection closes

        def stopped() -> bool:
            before = len(sb.read("ticks"))
            time.sleep(1.0)
            return len(sb.read("ticks")) == before

        assert wait_until(stopped, bound=60), "the command kept running"


def test_stream_errors_before_the_start_are_exceptions(client, need_ns):
    with client.create() as sb:
        sb.shutdown()
        with pytest.raises(cordon.Refused):
            list(sb.stream(["true"]))
    with pytest.raises(cordon.NotFound):
        list(cordon.Sandbox(client, {"id": "0123456789abcdef"}).stream(["true"]))


def test_bad_requests_are_refused(client, need_ns):
    with pytest.raises(cordon.Refused) as e:
        client.create(no_such_field=1)
    assert (e.value.status, e.value.code) == (400, "bad_manifest")
    with pytest.raises(cordon.NotFound):
        client.create(backend="no-such-backend")
    with client.create() as sb:
        with pytest.raises(cordon.Refused) as e:
            sb.exec(["true"], max_output=-1)
        assert (e.value.status, e.value.code) == (400, "bad_exec")
        with pytest.raises(cordon.CordonError) as e:
            sb.read("../../etc/passwd")
        assert e.value.status in (400, 403)
        with pytest.raises(cordon.NotFound):
            sb.read("missing")
    with pytest.raises(ValueError):
        cordon.Sandbox(client, {"id": "x"}).exec([])
    with pytest.raises(TypeError):
        cordon.Sandbox(client, {"id": "x"}).exec("echo a shell line")
    with pytest.raises(cordon.Refused) as e:
        client.request("POST", "/v1/sessions", b"{not json")
    assert (e.value.status, e.value.code) == (400, "malformed_json")
    with pytest.raises(cordon.Refused) as e:
        client.request("PUT", "/healthz")
    assert e.value.status == 405
    with pytest.raises(cordon.NotFound) as e:
        client.request("GET", "/v1/nothing")
    assert e.value.code == "no_route"


def test_snapshots_take_show_export_import(client, project):
    tree = project / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_bytes(b"data")
    snap = client.take_snapshot(tree)
    assert snap == run_cordon("snapshot", "take", str(tree)).strip()
    entries = client.snapshot_entries(snap[:12])
    assert [e["path"] for e in entries] == ["", "sub", "sub/f"]
    image = client.export_snapshot(snap)
    cli_image = subprocess.run([os.environ["CORDON"], "snapshot", "export", snap],
                               check=True, capture_output=True).stdout
    assert image == cli_image
    assert client.import_snapshot(image) == snap
    with pytest.raises(cordon.Refused) as e:
        client.import_snapshot(b"not a tar image")
    assert e.value.code == "invalid"
    with pytest.raises(cordon.NotFound):
        client.snapshot_entries("f" * 64)
    with pytest.raises(cordon.Refused):
        client.take_snapshot("relative/path")


def test_race_receipt_and_its_verification(client, project, need_ns):
    run_cordon("key", "init")
    (project / "tree").mkdir()
    (project / "tree" / "a").write_text("base\n")
    base = client.take_snapshot(project / "tree")
    receipt = client.race(base[:12], 2, ["sh", "-c", "echo $CORDON_CANDIDATE_INDEX > out"],
                          backend="ns", wait=600)
    assert isinstance(receipt, dict)
    kid = run_cordon("key", "show", "--kid").strip()
    v = client.verify_receipt(receipt, expected_keyid=kid)
    assert v.verdict == "verified" and v and v.kid == kid and v.candidates == 2
    assert v.base == base
    # The file the race kept in the project (the server's race writes it as the CLI's does).
    [path] = list((project / ".cordon" / "receipts").glob("*.json"))
    assert json.loads(path.read_bytes()) == receipt
    assert client.verify_receipt(str(path), expected_keyid=kid).verified
    assert client.verify_receipt(path.read_bytes()).verdict == "unanchored"
    forged = json.loads(json.dumps(receipt))
    forged["base"] = "0" * 64 if "base" in forged else None
    assert not client.verify_receipt(forged, expected_keyid=kid).verified
    with pytest.raises(cordon.NotFound):
        client.race_status("0123456789abcdef")
    with pytest.raises(cordon.Refused) as e:
        client.start_race("x", 0, ["true"])
    assert e.value.code == "bad_race"


def test_audit_metrics_jwks(project, need_ns):
    run_cordon("key", "init")  # before the server starts: it reads the key once
    client = cordon.Client()
    assert client.jwks() == json.loads(run_cordon("key", "jwks"))
    with client.create() as sb:
        sb.exec(["true"])
    audit = client.verify_audit()
    assert audit["intact"] is True
    text = client.metrics()
    assert 'sandbox_exec_count_total{backend="ns",exit_code="0"}' in text
    assert "sandbox_session_created_total" in text
    client.close()


def exec_count(text: str, exit_code: str) -> float:
    """sandbox_exec_count_total{backend="ns",exit_code=...}, read with the reference parser."""
    parser = pytest.importorskip(
        "prometheus_client.parser", reason="python3-prometheus-client is not installed"
    )
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "sandbox_exec_count_total" and sample.labels == {
                "backend": "ns",
                "exit_code": exit_code,
            }:
                return sample.value
    return 0.0


def test_metrics_count_each_exec_once(client, need_ns):
    """The library logs every exec, the server's too; /metrics reads only that log, so N execs
    through the SDK and M through the CLI move the counter by N + M, never twice."""
    before = exec_count(client.metrics(), "0")
    with client.create() as sb:
        for _ in range(3):
            assert sb.exec(["true"]).exit_code == 0
        assert list(sb.stream(["true"]))[-1] == ("exit", 0)
        for _ in range(2):
            run_cordon("session", "exec", sb.id, "--", "true")
        text = client.metrics()
    assert exec_count(text, "0") == before + 4 + 2
    assert exec_count(client.metrics(), "0") == before + 6


def test_threads_share_one_client(client, need_ns):
    with client.create() as sb:
        failures: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(10):
                    r = sb.exec(["echo", f"{n}-{i}"])
                    assert r.stdout == f"{n}-{i}\n".encode()
            except BaseException as e:  # noqa: BLE001 - reported below
                failures.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures


def test_tcp_tokens_and_scopes(tcp_server, need_ns):
    url = tcp_server.url
    assert url.startswith("http://127.0.0.1:")
    # No token: only healthz and the JWKS answer.
    anonymous = cordon.Client(url)
    assert anonymous.health()["status"] == "ok"
    assert "keys" in anonymous.jwks()
    with pytest.raises(cordon.Unauthorized) as e:
        anonymous.backends()
    assert (e.value.status, e.value.code) == (401, "unauthorized")
    with pytest.raises(cordon.Unauthorized):
        cordon.Client(url, token="not.a.token").backends()
    # alg none, made by hand, is refused too.
    import base64

    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    unsigned = part({"alg": "none", "typ": "JWT"}) + "." + part(
        {"sub": "x", "scope": "admin", "iat": 0, "exp": 2**40, "jti": "j"}) + "."
    with pytest.raises(cordon.Unauthorized):
        cordon.Client(url, token=unsigned).backends()

    reader = cordon.Client(url, token=tcp_server.token("read"))
    assert any(b["name"] == "ns" for b in reader.backends())
    with pytest.raises(cordon.Unauthorized) as e:
        reader.create()
    assert (e.value.status, e.value.code) == (403, "forbidden")

    executor = cordon.Client(url, token=tcp_server.token("exec"))
    with executor.create() as sb:
        assert sb.exec(["echo", "over tcp"]).stdout == b"over tcp\n"
        assert reader.sandbox(sb.id).ls() == []
        with pytest.raises(cordon.Unauthorized) as e:
            reader.sandbox(sb.id).exec(["true"])
        assert e.value.status == 403
    # A host path needs admin.
    with pytest.raises(cordon.Unauthorized) as e:
        executor.create(workspace=str(tcp_server.token_file.parent))
    assert e.value.code == "forbidden"
    admin = cordon.Client(url, token=tcp_server.admin_token)
    assert admin.verify_audit()["intact"] is True

    claims = json.loads(run_cordon("token", "create", "--scope", "read", "--json"))
    revoked = cordon.Client(url, token=claims["token"])
    revoked.backends()
    run_cordon("token", "revoke", claims["jti"])
    with pytest.raises(cordon.Unauthorized) as e:
        revoked.backends()
    assert e.value.status == 401
    for c in (anonymous, reader, executor, admin, revoked):
        c.close()
