"""Time every kernel of two builds, interleaved: ``nntile-lab bench kernels`` with the build in
BEFORE_EXT_DIR (a copy of ``nntile_lab/_ext`` kept from before a change to kernels/), then
with this checkout's, and again, ``--rounds`` times; each run under ``flock
/work/bench.lock`` (benchmarks on a shared machine must not overlap).

    .venv/bin/python scripts/kernels_ab.py BEFORE_EXT_DIR [--rounds 3] [--only a,b]
                                           [--variant v4] [--json OUT]

Prints one line per kernel: the median over rounds of each run's median time per call,
before and after, as CPU time of the calling thread (the kernel's own, on a shared core)
and wall time, and after/before. The same Python code runs both builds (this checkout's,
with the other build's extension in a copy of the package), so only the kernels differ.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _package_with(ext_dir: str, tmp: str) -> str:
    """A copy of this checkout's package whose _ext is ext_dir's: its PYTHONPATH entry."""
    dst = os.path.join(tmp, "nntile_lab")
    shutil.copytree(os.path.join(ROOT, "nntile_lab"), dst,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name in os.listdir(ext_dir):
        if name.endswith(".so"):
            shutil.copy(os.path.join(ext_dir, name), os.path.join(dst, "_ext", name))
    return tmp


def _run(pythonpath: str | None, args: list[str], env: dict) -> dict:
    env = dict(env)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cmd = ["flock", "/work/bench.lock", sys.executable, "-c",
           "import sys; from nntile_lab import cli, _lib; "
           "assert _lib.EXT_FILE.startswith(sys.argv[1]), _lib.EXT_FILE; "
           "sys.exit(cli.main(sys.argv[2:]))",
           pythonpath or os.path.join(ROOT, "nntile_lab"), "bench", "kernels", "--json", *args]

    # from the copy's folder: `python -c` puts the working directory first on sys.path
    done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          cwd=pythonpath or ROOT)
    if done.returncode:
        raise RuntimeError(f"bench kernels failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="folder with the other build's v3/v4 .abi3.so")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma list of ops (default: all)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--variant", default="", help="NNTILE_LAB_CPU_VARIANT for both")
    ap.add_argument("--json", default="", help="write every run's results here")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    if args.variant:
        env["NNTILE_LAB_CPU_VARIANT"] = args.variant
    extra = ["--repeats", str(args.repeats)] + (["--only", args.only] if args.only else [])
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        before_path = _package_with(args.before, tmp)
        for r in range(args.rounds):
            for which, path in (("before", before_path), ("after", None)):
                with open("/proc/loadavg") as f:
                    loads.append(f.read().split()[:3])
                runs[which].append(_run(path, extra, env))
                if args.json:   # after every run: a long A/B interrupted keeps what it measured
                    with open(args.json, "w") as f:
                        json.dump({"runs": runs, "loads": loads}, f)
                print(f"round {r + 1}/{args.rounds} {which} done, load {' '.join(loads[-1])}",
                      file=sys.stderr)
    first = runs["after"][0]
    m = first["machine"]
    print(f"bench kernels A/B: {m['cpu']} ({', '.join(m['isa'])}), variant {first['variant']}, "
          f"{m['date']}, {args.rounds} interleaved rounds, load (1/5/15 min) from "
          f"{' '.join(loads[0])} to {' '.join(loads[-1])}")
    print(f"{'kernel':<28}{'CPU µs before':>14}{'after':>10}{'ratio':>8}"
          f"{'wall µs before':>16}{'after':>10}{'ratio':>8}")
    # the kernels both builds have (a new row has no "before")
    names = [k["name"] for k in first["kernels"]
             if any(b["name"] == k["name"] for b in runs["before"][0]["kernels"])]
    table = []
    def med(name, which, key):
        return statistics.median(next(k[key] for k in run["kernels"] if k["name"] == name)
                                 for run in runs[which])
    for name in names:
        cb, ca = med(name, "before", "time_us_cpu"), med(name, "after", "time_us_cpu")
        wb, wa = med(name, "before", "time_us"), med(name, "after", "time_us")
        table.append((name, cb, ca, wb, wa))
        print(f"{name:<28}{cb:>14.1f}{ca:>10.1f}{ca / cb:>8.3f}{wb:>16.1f}{wa:>10.1f}"
              f"{wa / wb:>8.3f}")
    ratios = [ca / cb for _, cb, ca, _, _ in table]
    print(f"after/before CPU time: median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
