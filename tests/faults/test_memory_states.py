"""Full-capacity memory states out of core: tiles that fill RAM cap + disk node exactly,
or leave less room than the tasks in flight need, raise nl.OutOfMemory naming the
numbers (StarPU 1.3 would spin forever: 7 × gemm on a 1024² tensor in 256² tiles hung
`rt.wait()` for good); a state the guard misses is caught by the stall watchdog, after
which the runtime drains and stops, Ctrl-C included. Each case runs in a child with a
time limit, so a hang fails the test."""
import re

import pytest

from tests.faults._proc import finish, spawn

CHILD = "tests/faults/memory_child.py"


def run(*args, timeout=40):
    rc, out, err = finish(spawn(CHILD, *args), timeout)
    assert rc == 0, err[-2000:]
    assert "Assertion" not in err and "RESULT_WRONG" not in out, (out, err[-2000:])
    return out


def test_exactly_full_ram_and_disk_is_refused_with_the_numbers():
    out = run("full", "7", "256", "2")
    assert re.search(r"OOM .*needs 4\.0 MiB of new tiles; with the 28\.0 MiB already held "
                     r"and 2\.25 MiB kept free for the tasks in flight .* more than "
                     r"memory_limit_mb=16 \+ ooc_size_mb=16 .* raise ooc_size_mb to at "
                     r"least \d+", out), out
    assert "OK 6" in out   # the six products before the refusal are right


@pytest.mark.parametrize("extra_tiles", [9, 10, 12, 15])
def test_short_of_full_by_less_than_the_tasks_in_flight_is_refused(extra_tiles):
    """10 extra 256 KiB tiles (30.5 of 32 MiB held) hung StarPU before the guard."""
    out = run("short", str(extra_tiles))
    assert out.startswith("OOM ") and "kept free for the tasks in flight" in out, out


@pytest.mark.parametrize("n,tile,ncpu", [(6, 256, 2), (7, 256, 1), (8, 128, 2),
                                         (7, 512, 2), (9, 256, 2)])
def test_states_near_capacity_finish_or_refuse_never_hang(n, tile, ncpu):
    out = run("full", str(n), str(tile), str(ncpu))
    assert re.fullmatch(r"(OOM [^\n]+\n)?OK \d+\n", out), out


def test_a_ram_cap_alone_can_be_filled_exactly_and_no_further():
    assert run("ram", "3") == "OK 3\n"   # 4 + 3 × 4 MiB = the 16 MiB cap
    out = run("ram", "4")
    assert re.search(r"OOM .*with the 16\.0 MiB already held that is 20 MiB, more than "
                     r"memory_limit_mb=16 and no disk node allow", out), out
    assert "OK 3" in out


def test_watchdog_turns_a_stall_into_an_error_and_the_runtime_still_stops():
    out = run("stall", "wait")
    stall = re.search(r"STALL ([\d.]+) StarPU stalled: no task ended for 2 s while memory "
                      r"was full \(RAM [\d.]+ MiB free of 16\.0, disk node [\d.]+ MiB free "
                      r"of 16\.0\).*ooc_size_mb ≥ \d+", out)
    assert stall and float(stall.group(1)) < 15, out
    assert "REFUSED" in out and "stalled earlier" in out   # no new work after a stall
    assert "DRAINED True" in out                            # queued work ends, right
    assert "EXIT_OOM StarPU stalled" in out                 # and is reported at the exit


def test_ctrl_c_in_a_stalled_wait_then_leaving_the_with_block_does_not_hang():
    out = run("stall", "sigint")
    assert "INTERRUPTED" in out and "EXIT_INTERRUPT True" in out, out
    assert float(re.search(r"END ([\d.]+)", out).group(1)) < 15
