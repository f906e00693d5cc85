"""scripts/gpu_check.sh and gpu_check.py (issue 32): the logic of the one GPU command, run
here with the GPU stubbed by the emulation (``--emulate``: the OpenCL worker on PoCL's CPU
device as the accelerator, with its own memory node and cap; the CUDA kernels' host
emulation as part (a)). What ran on a real GPU is in BENCHMARKS.md ("nntile_lab on an
NVIDIA H200"); there the same script used CUDA workers, CuPy and PyTorch on the GPU."""
import json
import os
import subprocess
import sys
import tarfile

import pytest

from tests.conftest import need_opencl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check.sh")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpu_check  # noqa: E402


def run(*args, env=None, timeout=600):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env={**os.environ, **(env or {})})


def record(out, part):
    with open(os.path.join(out, "records", f"part_{part}.json")) as f:
        return json.load(f)


def test_every_part_runs_in_emulation_and_says_what_it_found(tmp_path):
    need_opencl()
    out = tmp_path / "out"
    done = run("--emulate", "--parts", "abcdf", "--out", str(out), "--pack")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # the header first, then every part, then the table
    log = (out / "gpu_check.log").read_text()
    assert log.index("== the machine") < log.index("== part (a)") < log.index("| part |")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["all_passed"] and summary["emulated"] and summary["accelerator"] == "opencl"
    assert [r["status"] for r in summary["parts"]] == ["PASS", "PASS", "SKIP", "PASS", "PASS"]
    # --pack: the records in one tarball, nothing else beside the log and the summary
    assert sorted(os.listdir(out)) == ["gpu_check.log", "gpu_check.tar.gz", "summary.json"]
    with tarfile.open(out / "gpu_check.tar.gz") as tar:
        tar.extractall(out, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    env = json.loads((out / "records" / "env.json").read_text())
    assert env["python"] == sys.version.split()[0] and env["cores"] >= 1
    a = record(out, "a")
    assert a["numbers"]["tests"]["tests"] > 20 and a["numbers"]["tests"]["failures"] == 0
    b = record(out, "b")["numbers"]
    ref = b["cpu-only"]["losses"]
    assert len(ref) == 3 and ref[0] > ref[1] > ref[2]   # the fixed batch is being learned
    for name in ("gpu-only", "mixed"):
        assert gpu_check.rel_diff(b[name]["losses"], ref) <= gpu_check.LOSS_RTOL
    assert set(b["gpu-only"]["tasks_by_arch"]) == {"opencl"}
    assert set(b["mixed"]["tasks_by_arch"]) == {"cpu", "opencl"}
    assert record(out, "c")["status"] == "SKIP"
    d = record(out, "d")["numbers"]
    capped = d["gpu capped"]
    assert d["model"]["planned_peak_mb"] > 2 * d["cap_mb"]
    assert capped["device_peak_used_mb"] <= d["cap_mb"] == capped["device_capacity_mb"]
    assert gpu_check.bus_bytes(capped, "OpenCL", "NUMA") > 0
    f = record(out, "f")["numbers"]["schedulers"]
    assert set(f) == {"gpu-only (dmda)", *gpu_check.SCHEDULERS}
    assert all(0 <= row["device_task_share"] <= 1 for row in f.values())


def test_part_e_measures_both_systems_and_the_overflow_in_emulation(tmp_path):
    need_opencl()
    out = tmp_path / "out"
    done = run("--emulate", "--parts", "e", "--e-plan", "overflow,trace", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    e = record(out, "e")["numbers"]
    assert e["plan"] == ["overflow", "trace"]
    res = {(r["system"], r["precision"]): r for r in e["results"]}
    over = res[("nntile", "fp32")]
    assert over["step_s"] > 0 and over["runtime"]["opencl_memory_limit_mb"] == 16
    assert res[("torch", "fp32")]["device"] == "cpu" and res[("torch", "fp32")]["step_s"] > 0
    for prec in ("fp32", "bf16"):   # a traced step: where its time went
        tr = res[("trace", prec)]["trace"]
        assert tr["tasks"] > 0 and tr["top_ops"] and "opencl" in tr["busy_ms_by_arch"]


def test_a_part_out_of_time_fails_with_what_it_measured_and_the_next_still_runs(tmp_path):
    need_opencl()
    out = tmp_path / "out"
    done = run("--emulate", "--parts", "db", "--budget", "d=3", "--out", str(out))
    assert done.returncode == 1, done.stdout[-3000:]
    d = record(out, "d")
    assert d["status"] == "FAIL" and d["error"].startswith("stopped by its time budget")
    assert "model" in d["numbers"]              # what it had written before the stop
    assert record(out, "b")["status"] == "PASS"
    assert "| (d) | GPU memory capped" in done.stdout and "| FAIL |" in done.stdout


def test_the_deadline_leaves_parts_unstarted_and_says_so(tmp_path):
    out = tmp_path / "out"
    done = run("--emulate", "--parts", "c", "--deadline", "25", "--out", str(out))
    assert done.returncode == 1
    c = record(out, "c")
    assert c["status"] == "FAIL" and c["error"] == "not started: --deadline left it no time"


@pytest.mark.parametrize("args, needle", [
    (("--parts", "abz"), "--parts 'abz': give letters from abcdef"),
    (("--budget", "e=0"), "--budget 'e=0': give PART=SECONDS"),
    (("--budget", "q=10"), "--budget 'q=10'"),
    (("--deadline", "soon"), "--deadline 'soon': give whole seconds"),
    (("--e-plan", "fits,everything"), "--e-plan 'fits,everything'"),
    (("--build", "p", "--prebuilt", "d"), "give one of --build, --prebuilt and --make-bundle"),
    (("--emulate", "--prebuilt", "d"), "--emulate runs on this checkout as installed"),
    (("--frobnicate",), "unknown option '--frobnicate'"),
    (("--out",), "--out needs a value"),
])
def test_bad_options_are_one_line_and_exit_2(args, needle):
    done = run(*args)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "== part" not in done.stdout   # nothing ran


def test_a_bundle_is_checked_before_it_is_used_or_made(tmp_path):
    done = run("--prebuilt", str(tmp_path), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "has no manifest.json: make it with --make-bundle" in \
        done.stderr
    (tmp_path / "manifest.json").write_text(json.dumps({"python": "2.7"}))
    done = run("--prebuilt", str(tmp_path), "--out", str(tmp_path / "o"), "--python",
               sys.executable)
    assert done.returncode == 2 and "the bundle is for Python 2.7" in done.stderr
    done = run("--make-bundle", str(tmp_path / "b"), "--starpu", str(tmp_path / "none"))
    assert done.returncode == 2 and "holds no StarPU 1.3" in done.stderr
    # Debian's StarPU (no CUDA) is refused: a bundle is for a GPU machine
    fake = tmp_path / "starpu"
    (fake / "lib" / "pkgconfig").mkdir(parents=True)
    (fake / "lib" / "pkgconfig" / "starpu-1.3.pc").write_text("")
    (fake / "include" / "starpu" / "1.3").mkdir(parents=True)
    (fake / "include" / "starpu" / "1.3" / "starpu_config.h").write_text("#define X 1\n")
    done = run("--make-bundle", str(tmp_path / "b"), "--starpu", str(fake))
    assert done.returncode == 2 and "has no CUDA" in done.stderr
    assert not (tmp_path / "b").exists()


def _write(out, part, **kw):
    data = {"part": part, "title": gpu_check.TITLES[part], "checks": [], "numbers": {},
            "seconds": 1.0} | kw
    gpu_check.write_json(os.path.join(out, f"part_{part}.json"), data)


def test_the_summary_fails_on_a_failed_running_or_missing_part(tmp_path, capsys):
    out = str(tmp_path)
    _write(out, "a", status="PASS", checks=[{"name": "x", "ok": True, "detail": ""}])
    _write(out, "c", status="SKIP")
    assert gpu_check.cmd_summary(out, "ac") == 0
    _write(out, "b", status="RUNNING", numbers={"cpu-only": {"losses": [1.0]}})
    gpu_check.cmd_stopped("b", 137, 40.0, out)   # killed by its budget
    b = json.loads((tmp_path / "part_b.json").read_text())
    assert b["status"] == "FAIL" and b["numbers"] == {"cpu-only": {"losses": [1.0]}}
    assert b["error"] == "stopped by its time budget after 40 s"
    gpu_check.cmd_stopped("a", 1, 2.0, out)   # a finished record is left as it is
    assert json.loads((tmp_path / "part_a.json").read_text())["status"] == "PASS"
    gpu_check.cmd_stopped("e", 139, 5.0, out)   # crashed before writing anything
    assert "ended with code 139" in json.loads((tmp_path / "part_e.json").read_text())["error"]
    capsys.readouterr()
    assert gpu_check.cmd_summary(out, "abcdf") == 1
    table = capsys.readouterr().out
    assert "| (d) |" in table and "no record (the part did not run)" in table
    rows = json.loads((tmp_path / "summary.json").read_text())["parts"]
    assert [r["status"] for r in rows] == ["PASS", "FAIL", "SKIP", "FAIL", "FAIL"]


@pytest.mark.parametrize("other, moved, ok", [
    ([5.0, 4.5, 4.0], True, True),                       # equal losses
    ([5.0, 4.5, 4.0 * (1 + 3 * gpu_check.LOSS_RTOL)], True, False),   # one drifts
    ([5.0, 5.0, 5.0], False, False),                     # nothing trained
])
def test_the_loss_checks_catch_a_difference_and_a_run_that_did_nothing(tmp_path, other, moved,
                                                                      ok):
    rec = gpu_check.Record(str(tmp_path), "b")
    ref = [5.0, 4.5, 4.0] if moved else other
    gpu_check._loss_checks(rec, {"cpu-only": {"losses": ref}, "gpu": {"losses": other}},
                           "cpu-only")
    rec.finish()
    assert (rec.data["status"] == "PASS") == ok
    assert rec.data["checks"][0]["ok"] == moved


def test_junit_counts_and_names_the_failures(tmp_path):
    path = tmp_path / "j.xml"
    path.write_text('<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
                    '<testcase classname="t.m" name="ok"/><testcase classname="t.m" name="bad">'
                    '<failure message="assert 1 == 2&#10;more">x</failure></testcase>'
                    '<testcase classname="t.m" name="skip"><skipped/></testcase>'
                    '</testsuite></testsuites>')
    counts, failed = gpu_check._junit(str(path))
    assert counts == {"tests": 3, "failures": 1, "errors": 0, "skipped": 1}
    assert failed == ["t.m::bad: assert 1 == 2"]
    assert gpu_check._junit(str(tmp_path / "none.xml")) == (
        {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}, [])


def test_the_extension_uses_the_limited_api_so_a_bundle_loads_on_a_newer_python():
    """cffi builds API-mode modules against Python's limited API (abi3): the extension built
    here (Python 3.11) loaded on the H200 machine's Python 3.12 from the bundle."""
    from nntile_lab._lib import EXT_FILE
    assert EXT_FILE.endswith(".abi3.so"), EXT_FILE
