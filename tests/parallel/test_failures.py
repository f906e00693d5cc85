"""One line from what Open MPI printed when a multi-host run failed (``parallel.failures``), on
the texts Open MPI 4.1 printed in the cluster's fault runs (tests/faults/test_cluster_faults.py
checks the same end to end)."""
import pytest

from nntile_lab.parallel.failures import Filter, diagnose

BAR = "-" * 74 + "\n"
LINK_DOWN = ("[vm:06236] plm:rsh: Warning: setpgid(6244,6244) failed in parent with "
             "errno=Permission denied(13)\n" + BAR + """ORTE has lost communication with a \
remote daemon.

  HNP daemon   : [[29858,0],0] on node vm
  Remote daemon: [[29858,0],3] on node tst-h3

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
""" + BAR)
KILLED = (BAR + """Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
""" + BAR + BAR + """An MPI communication peer process has unexpectedly disconnected.  This
usually indicates a failure in the peer process (e.g., a crash or
otherwise exiting without calling MPI_FINALIZE first).

  Local host: tst-h1
  Local PID:  7117
  Peer host:  tst-h2
""" + BAR + BAR + """mpirun noticed that process rank 1 with PID 7118 on node tst-h2 exited on \
signal 9 (Killed).
""" + BAR + """[vm:07066] 1 more process has sent help message help-mpi-btl-tcp.txt / peer hung up
""")
NO_ROUTE = (BAR + """A process or daemon was unable to complete a TCP connection
to another process:
  Local host:    tst-h3
  Remote host:   vm
This is usually caused by a firewall on the remote host. Please
check that any firewall (e.g., iptables) has been disabled and
try again.
""" + BAR)
RAISED = ("Traceback (most recent call last):\nRuntimeError: rank 2 fails on purpose\n"
          "nntile_lab: rank 2 on host c-h3 failed: aborting all 4 ranks\n" + BAR
          + "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\n" + BAR)
EXITED = (BAR + """mpirun detected that one or more processes exited with non-zero status, \
thus causing
the job to be terminated. The first process to do so was:

  Process name: [[4249,1],1]
  Exit code:    7
""" + BAR)


@pytest.mark.parametrize("text, host, cause", [
    (LINK_DOWN, "tst-h3", "lost the connection to host tst-h3: its network link is down"),
    (KILLED, "tst-h2", "rank 1 on host tst-h2 was killed by signal 9 (Killed)"),
    (NO_ROUTE, "tst-h3", "host tst-h3 could not open a TCP connection to vm"),
    (RAISED, "c-h3", "rank 2 on host c-h3 failed (its error is above)"),
    (EXITED, None, "rank 1 exited with status 7")])
def test_the_cause_and_the_host(text, host, cause):
    failure = diagnose(text)
    assert failure is not None and failure.host == host
    assert failure.cause.startswith(cause), failure.cause
    line = failure.line(4, "The last checkpoint is intact.")
    assert line.startswith(f"nntile-lab: {cause}") and "\n" not in line
    assert line.endswith("; all 4 ranks stopped. The last checkpoint is intact.")


def test_a_lost_host_explains_the_ranks_killed_with_it():
    failure = diagnose(KILLED.replace(BAR + "mpirun noticed", LINK_DOWN + BAR + "mpirun noticed"))
    assert failure.host == "tst-h3" and failure.cause.startswith("lost the connection")


def test_what_it_cannot_explain_is_left_alone():
    assert diagnose("Traceback ...\nValueError: bad --lr\n") is None


def test_the_filter_holds_open_mpis_blocks_and_passes_the_rest():
    f = Filter()
    text = "step 1 done\n" + KILLED + "Traceback (most recent call last):\n  x\nKeyError: 1\n"
    shown = "".join(f.feed(ln) for ln in text.splitlines(keepends=True))
    assert shown == "step 1 done\nTraceback (most recent call last):\n  x\nKeyError: 1\n"
    assert f.all() == text
    assert "mpirun noticed" in f.held() and "[vm:07066]" in f.held()


def test_pieces_of_rank_lines_glued_to_a_bar_are_held():
    """A rank's BTL_ERROR arrives in pieces (prefix, message, newline written apart), and
    mpirun's own block can land between them: as in a CI run of the kill test."""
    prefix = ("[c-h3][[9058,1],2][../../../../../../opal/mca/btl/tcp/btl_tcp_endpoint.c:1065:"
              "mca_btl_tcp_endpoint_send_handler] ")
    text = (prefix + "invalid connection state (2)\n" + prefix + BAR
            + "Primary job  terminated normally, but 1 process returned\n" + BAR
            + "invalid connection state (2)\n"
            + "mca_btl_tcp_frag_send: writev failed: Broken pipe (32)\n"
            + BAR + "mpirun noticed that process rank 1 with PID 1 on node c-h2 exited on "
            "signal 9 (Killed).\n" + BAR + "step 3 done\n")
    f = Filter()
    assert "".join(f.feed(ln) for ln in text.splitlines(keepends=True)) == "step 3 done\n"
    assert diagnose(f.all()).host == "c-h2"


def test_a_ranks_own_words_come_before_open_mpis():
    """A proxy rank that refuses its job says why on stderr; Open MPI's show_help errors
    after its MPI_Abort must not turn that into an MPI_Init failure."""
    import subprocess

    from nntile_lab.parallel.failures import why_failed
    err = ("rank 0: replay buffers need 2611.0 GiB (> 25% of RAM): pass --scale N\n"
           "[vm:27128] [[1286,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer "
           "in file ../../../orte/util/show_help.c at line 501\n")
    assert why_failed(subprocess.CompletedProcess([], 3, "", err)) == err.splitlines()[0]
    assert why_failed(subprocess.CompletedProcess([], 1, "", KILLED)).startswith(
        "rank 1 on host tst-h2 was killed")
