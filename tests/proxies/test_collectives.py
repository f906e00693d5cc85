"""α-β model: fit on synthetic and measured points, checks, extrapolation timeline."""
import math

import pytest

from nntile_lab.cli import main
from nntile_lab.proxies import collectives as coll
from nntile_lab.proxies import extrapolate as ex
from nntile_lab.proxies import models
from nntile_lab.proxies.program import FLOAT_BYTES, Compute


def synthetic(alpha, beta, ranks, sizes):
    return [{"op": op, "bytes": n, "ranks": ranks,
             "time_s": coll.cost(op, n, ranks, alpha, beta)}
            for op in coll.OPS for n in sizes]


def test_fit_recovers_alpha_beta_and_ignores_a_spike():
    sizes = coll.default_sizes(8, 2**20)
    rows = synthetic(3e-6, 1 / 7e9, 4, sizes)
    rows[5] = dict(rows[5], time_s=rows[5]["time_s"] * 50)   # a preempted rank
    model = coll.fit(rows)
    for op in coll.OPS:
        assert model[op]["alpha"] == pytest.approx(3e-6, rel=1e-6)
        assert model[op]["beta"] == pytest.approx(1 / 7e9, rel=1e-6)
    err = coll.relative_errors(model, rows)
    assert err[rows[5]["op"]]["max"] == pytest.approx(49 / 50, rel=1e-6)
    assert all(e["median"] < 1e-9 for e in err.values())


def test_cost_formulas():
    n, a, b = 1e6, 2e-6, 1e-9
    assert coll.cost("allreduce", n, 4, a, b) == pytest.approx(6 * a + 1.5 * n * b)
    assert coll.cost("allgather", n, 4, a, b) == pytest.approx(3 * a + 3 * n * b)
    assert coll.cost("alltoall", n, 4, a, b) == pytest.approx(3 * a + 0.75 * n * b)
    assert coll.cost("allreduce", n, 1, a, b) == 0
    assert coll.cost("p2p", n, 2, a, b) == pytest.approx(a + n * b)


def test_measured_fit_holds_on_held_out_sizes(tmp_path):
    # small sizes keep the test fast; the held-out sizes lie between the fitted ones
    rows = coll.run(2, ("p2p", "allreduce"), coll.default_sizes(8, 256 * 1024), timeout=240)
    assert {r["op"] for r in rows} == {"p2p", "allreduce"}
    assert all(r["ranks"] == 2 and r["time_s"] > 0 for r in rows)
    res = coll.fit_and_check(rows)
    for op in ("p2p", "allreduce"):
        m = res["model"][op]
        assert 0 < m["alpha"] < 1e-3 and m["beta"] > 0
        assert res["held_out"][op]["median"] < 0.5, coll.report(res)
    path = coll.plot(res, str(tmp_path / "coll.png"))
    with open(path, "rb") as f:
        assert f.read(4) == b"\x89PNG"


def test_simulated_pipeline_is_compute_plus_two_messages():
    proxy = models.build("gpt2", "small", seq_len=64, pipeline=2)
    ln = ex.Link("test", 2e-6, 5e9)
    sim = ex.simulate(proxy, ln)
    compute = sum(e.seconds for r in proxy.programs for e in proxy.program(r)
                  if isinstance(e, Compute))
    msg = ln.latency_s + 64 * 768 * FLOAT_BYTES * ln.beta
    # one micro-batch: nothing overlaps, the stages take turns
    assert sim["iteration_s"] == pytest.approx(compute + 2 * msg, rel=1e-12)


def test_data_parallel_with_a_free_link_exposes_nothing():
    rows = ex.extrapolate(dict(model="gpt2", config_name="small", seq_len=64), [1, 4, 16],
                          [ex.Link("free", 0.0, math.inf)])
    assert [r["nodes"] for r in rows] == [1, 4, 16]
    assert all(r["exposed_s"] == pytest.approx(0, abs=1e-15) for r in rows)
    slow = ex.extrapolate(dict(model="gpt2", config_name="small", seq_len=64), [16],
                          [ex.link("ethernet-10g")])[0]
    assert slow["exposed_s"] > 0 and slow["comm_s"] > slow["exposed_s"] * 0.1


def test_cli_extrapolate_plot(tmp_path, capsys):
    out = tmp_path / "x.png"
    assert main(["proxy", "cosmoflow", "--tensor", "4", "--extrapolate", "4,8,16",
                 "--interconnect", "infiniband-hdr", "--latency-us", "3", "--plot",
                 str(out)]) == 0
    assert "infiniband-hdr (3 us, 25 GB/s)" in capsys.readouterr().out
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert main(["proxy", "cosmoflow", "--tensor", "4", "--extrapolate", "6"]) == 2
    assert "multiple of tensor" in capsys.readouterr().err
    assert main(["proxy", "gpt2", "--extrapolate", "4", "--interconnect", "carrier-pigeon"]) == 2


def test_extrapolation_legend_hides_no_line(tmp_path, monkeypatch):
    """Issue 33 (notebook 08): CosmoFlow's legend lay over its lowest dashed line. The
    legend sits outside the axes now, for every model of the notebook."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    shown = []
    monkeypatch.setattr(ex, "save_figure", lambda fig, path: shown.append(fig))
    links = [ex.link(n) for n in ("infiniband-hdr", "ethernet-100g", "ethernet-10g")]
    ex.plot(ex.extrapolate(dict(model="cosmoflow", tensor=4), [4, 8, 16, 64, 256], links),
            str(tmp_path / "x.png"), "cosmoflow")
    (fig,) = shown
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    (legend,) = fig.legends
    assert not legend.get_window_extent(renderer).overlaps(
        fig.axes[0].get_window_extent(renderer))
    assert fig.get_window_extent(renderer).contains(*legend.get_window_extent(renderer).p0)
