#!/usr/bin/env python3
"""A dispatch served from a warm slot against a cold placement of the same recipe, as whole
`cordon run --pool` processes, on each backend asked for (issue 23, "Measure").

For each round, a warm slot is provisioned first (`cordon pool warm`, not timed), then a cold
dispatch (a pool with the same template and no warm slot) and a warm one run in turn, each timed
from the process's start to its exit. Rounds alternate which goes first, so a drift in the
machine's speed falls on both. Prints, per backend, the median of each and the ratio warm/cold
taken round by round (its median). Everything lives in a scratch project and key directory.

Without --backend, all three: ns, docker and microvm (a backend this host cannot run is printed
as skipped, with the reason). A microvm cold start boots a VM (tens of seconds under TCG): it
runs --vm-rounds rounds.

usage: bench.py [--cordon PATH] [--rounds N] [--vm-rounds N] [--backend NAME]... [--image IMAGE]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def pool_spec(name, backend, image):
    # The microvm backend declares no network: its pools ask for none.
    net = "none" if backend == "microvm" else "loopback"
    template = {"timeout_seconds": 60, "net": net,
                "capabilities": ["exec", "file_rw"]}
    if image:
        template["image"] = image
    return {"name": name, "backend_allowlist": [backend], "template": template,
            "exposed_fields": ["env"], "max_concurrency": 4,
            "capability_ceiling": ["exec", "file_rw"], "network_egress_class": net,
            "credential_env_allowlist": []}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cordon", default=os.environ.get("CORDON", "cordon"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--vm-rounds", type=int, default=3, help="rounds for microvm")
    ap.add_argument("--backend", action="append")
    ap.add_argument("--image", default=None, help="image for docker and microvm pools")
    args = ap.parse_args()
    backends = args.backend or ["ns", "docker", "microvm"]
    root = tempfile.mkdtemp(prefix="cordon-bench-pool-warm.")
    env = dict(os.environ, CORDON_PROJECT=root, CORDON_KEY_DIR=os.path.join(root, "keys"),
               XDG_STATE_HOME=os.path.join(root, "state"), CORDON_QUIET="1")
    os.makedirs(os.path.join(root, ".cordon"))
    os.makedirs(env["XDG_STATE_HOME"])

    def cordon(*words, check=True):
        return subprocess.run([args.cordon, *words], env=env, cwd=root, check=check,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def timed(*words):
        start = time.monotonic()
        r = cordon(*words, check=False)
        elapsed = time.monotonic() - start
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(words)}: exit {r.returncode}: {r.stderr.strip()}")
        return elapsed

    cordon("key", "init")
    print(f"{'backend':8} {'cold (s)':>9} {'warm (s)':>9} {'warm/cold':>10}   rounds")
    try:
        for backend in backends:
            image = args.image if backend != "ns" else None
            for name in (f"cold-{backend}", f"warm-{backend}"):
                path = os.path.join(root, name + ".json")
                with open(path, "w") as f:
                    json.dump(pool_spec(name, backend, image), f)
                cordon("pool", "register", path)
            cold, warm, ratios = [], [], []
            try:
                rounds = args.vm_rounds if backend == "microvm" else args.rounds
                for i in range(rounds + 1):  # the first round warms caches: not counted
                    cordon("pool", "warm", f"warm-{backend}", "--slots", "1")
                    order = ["cold", "warm"] if i % 2 else ["warm", "cold"]
                    got = {}
                    for kind in order:
                        got[kind] = timed("run", "--pool", f"{kind}-{backend}", "--", "true")
                    if i == 0:
                        continue
                    cold.append(got["cold"])
                    warm.append(got["warm"])
                    ratios.append(got["warm"] / got["cold"])
            except (RuntimeError, subprocess.CalledProcessError) as e:
                print(f"{backend:8} skipped: {getattr(e, 'stderr', None) or e}".strip())
                continue
            print(f"{backend:8} {statistics.median(cold):9.3f} {statistics.median(warm):9.3f} "
                  f"{statistics.median(ratios):10.3f}   {len(ratios)}"
                  f" (ratios {min(ratios):.2f} to {max(ratios):.2f})", flush=True)
    finally:
        for line in cordon("session", "list", check=False).stdout.splitlines():
            cordon("session", "destroy", line.split()[0], check=False)
        shutil.rmtree(root, ignore_errors=True)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"load average: {' '.join(load)}")


if __name__ == "__main__":
    sys.exit(main())
