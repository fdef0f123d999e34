"""Routes on the worktree backend, which needs no root (so these run on any host): a race's
receipt asked for while the race runs is 409 ``race_running`` (Refused) through both clients,
and cordon.aio's snapshot, receipt, race, audit and JWKS surface, which test_aio.py leaves to
the synchronous client's tests. A worktree candidate runs unconfined, so it can wait for a
file the test makes: the race cannot end before the test has seen the 409."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

import pytest

import cordon
import cordon.aio
from conftest import run_cordon, wait_until

WAIT_FOR = "while [ ! -e {} ]; do sleep 0.05; done; echo $CORDON_CANDIDATE_INDEX > out"


def base_snapshot(project) -> str:
    (project / "tree").mkdir()
    (project / "tree" / "a").write_text("base\n")
    return run_cordon("snapshot", "take", str(project / "tree")).strip()


def test_race_receipt_while_running_is_409(project):
    run_cordon("key", "init")
    base = base_snapshot(project)
    go = project / "go"
    with cordon.Client() as client:
        started = client.start_race(base[:12], 1, ["sh", "-c", WAIT_FOR.format(go)],
                                    backend="worktree", timeout_seconds=300)
        assert started["status"] == "running" and started["base"] == base
        with pytest.raises(cordon.Refused) as e:
            client.race_receipt(started["id"])
        assert (e.value.status, e.value.code) == (409, "race_running")
        # race() bounded by wait: a race still running past it is an error, not a hang.
        with pytest.raises(cordon.CordonError) as e:
            client.race(base, 1, ["sh", "-c", WAIT_FOR.format(go)], backend="worktree",
                        wait=0.5)
        assert e.value.code == "race_running"
        go.write_bytes(b"")
        assert wait_until(lambda: client.race_status(started["id"])["status"] != "running",
                          bound=120)
        assert client.race_status(started["id"])["status"] == "done"
        receipt = client.race_receipt(started["id"])
        kid = run_cordon("key", "show", "--kid").strip()
        assert client.verify_receipt(receipt, expected_keyid=kid).verified


def test_aio_snapshots_receipts_races_audit_jwks(project):
    run_cordon("key", "init")  # before the server starts: it reads the key once
    base = base_snapshot(project)
    go = project / "go"
    kid = run_cordon("key", "show", "--kid").strip()

    async def main():
        async with cordon.aio.Client() as client:
            assert await client.jwks() == json.loads(run_cordon("key", "jwks"))
            # Snapshots: take (the CLI's id), show, export (the CLI's bytes), import.
            assert await client.take_snapshot(project / "tree") == base
            entries = await client.snapshot_entries(base[:12])
            assert [e["path"] for e in entries] == ["", "a"]
            image = await client.export_snapshot(base)
            assert image == run_cordon_bytes("snapshot", "export", base)
            assert await client.import_snapshot(image) == base
            with pytest.raises(cordon.Refused) as e:
                await client.import_snapshot(b"not a tar image")
            assert (e.value.status, e.value.code) == (400, "invalid")
            with pytest.raises(cordon.NotFound):
                await client.snapshot_entries("f" * 64)
            # A race: 409 while it runs, then its receipt, verified.
            started = await client.start_race(base, 2, ["sh", "-c", WAIT_FOR.format(go)],
                                              backend="worktree", timeout_seconds=300)
            with pytest.raises(cordon.Refused) as e:
                await client.race_receipt(started["id"])
            assert (e.value.status, e.value.code) == (409, "race_running")
            go.write_bytes(b"")
            receipt = await client.race(base, 2, ["true"], backend="worktree", wait=300)
            verdict = await client.verify_receipt(receipt, expected_keyid=kid)
            assert verdict.verified and verdict.candidates == 2 and verdict.base == base
            assert (await client.verify_receipt(receipt)).verdict == "unanchored"
            forged = dict(receipt, base="0" * 64)
            assert not (await client.verify_receipt(forged, expected_keyid=kid)).verified
            with pytest.raises(cordon.NotFound):
                await client.race_status("0123456789abcdef")
            with pytest.raises(cordon.Refused) as e:
                await client.start_race("x", 0, ["true"])
            assert e.value.code == "bad_race"
            assert (await client.verify_audit())["intact"] is True
            # A worktree session through aio: the CLI sees it; destroyed by async with.
            async with await client.create(backend="worktree", net=None) as sb:
                assert sb.id in [s["id"] for s in await client.sessions()]
                assert (await sb.exec(["sh", "-c", "echo hi"])).stdout == b"hi\n"
            assert sb.id not in [s["id"] for s in await client.sessions()]

    asyncio.run(asyncio.wait_for(main(), 600))


def run_cordon_bytes(*args: str) -> bytes:
    return subprocess.run([os.environ["CORDON"], *args], check=True,
                          capture_output=True).stdout
