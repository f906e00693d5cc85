"""Extrapolate a proxy to N nodes with the α-β model: simulate one iteration's timeline.

One rank per node. Weak scaling: the tensor and pipeline sizes stay, ``data = N / (tensor ·
pipeline)`` replicas each keep their own micro-batches. Replicas (and tensor shards) run the
same program, so one rank per pipeline stage is simulated:

- compute advances the rank's clock by the modelled time;
- every message uses the rank's one link (a queue): a blocking collective starts when both
  the rank and its link are free and holds the rank; a non-blocking one only holds the link;
- a pipeline send arrives ``α + n·β`` after it starts; the receiver waits for it;
- ``Wait`` holds the rank until its link is free.

The iteration time is the latest stage's clock; *exposed* communication = iteration time − the
rank's compute.
"""
from __future__ import annotations

from dataclasses import dataclass

from nntile_lab.proxies.collectives import coefficients, cost, save_figure
from nntile_lab.proxies.models import build
from nntile_lab.proxies.program import FLOAT_BYTES, P2P, Collective, Compute, Proxy, Wait


@dataclass(frozen=True)
class Link:
    """One α-β pair for every operation: a link's nominal (or given) figures."""
    name: str
    latency_s: float
    bandwidth_bytes_s: float

    @property
    def beta(self) -> float:
        return 1.0 / self.bandwidth_bytes_s

    def time(self, op: str, nbytes: float, ranks: int) -> float:
        return cost(op, nbytes, ranks, self.latency_s, self.beta)


@dataclass(frozen=True)
class FittedLink:
    """α-β measured on few hosts (``collectives.fit`` rows' model), carried to any rank count
    by each operation's formula.

    ``per_op=False`` (the default) times every operation with the **p2p** fit — the link's own
    α and β — and the operation's algorithm formula; ``per_op=True`` uses each operation's own
    fit (which also holds what its implementation costs on the fitted rank count, and does not
    always carry over: Open MPI picks its algorithms by rank count and size).
    ``capacity_bytes_s``: what all hosts together can move per second (here the bridge, i.e.
    the CPUs that run every host's TCP stack); an operation then takes at least its ranks'
    bytes together over that."""
    name: str
    model: dict
    per_op: bool = False
    capacity_bytes_s: float | None = None

    def time(self, op: str, nbytes: float, ranks: int) -> float:
        key = op if self.per_op else "p2p"
        if key not in self.model:
            raise ValueError(f"{self.name}: no fit for {key!r} (measured: "
                             f"{', '.join(self.model)}): measure it with `collectives --ops`")
        fitted = self.model[key]
        t = cost(op, nbytes, ranks, fitted["alpha"], fitted["beta"])
        if self.capacity_bytes_s:
            _, per_rank = coefficients(op, ranks)
            together = per_rank * nbytes * (1 if op == "p2p" else ranks)
            t = max(t, together / self.capacity_bytes_s)
        return t


# Nominal per-link figures (one-way small-message latency, unidirectional bandwidth); what a
# job gets is lower: override with latency/bandwidth of your own measurement.
INTERCONNECTS = {
    "ethernet-10g": Link("ethernet-10g", 25e-6, 1.25e9),
    "ethernet-100g": Link("ethernet-100g", 5e-6, 12.5e9),
    "infiniband-hdr": Link("infiniband-hdr", 1.5e-6, 25e9),
    "infiniband-ndr": Link("infiniband-ndr", 1.0e-6, 50e9),
}


def link(name: str = "infiniband-hdr", latency_us: float | None = None,
         bandwidth_gbs: float | None = None) -> Link:
    if name not in INTERCONNECTS:
        raise ValueError(f"interconnect {name!r}: choose one of {', '.join(INTERCONNECTS)}")
    base = INTERCONNECTS[name]
    if (latency_us is not None and latency_us < 0) or (bandwidth_gbs is not None
                                                       and bandwidth_gbs <= 0):
        raise ValueError(f"latency_us={latency_us} must be >= 0 and bandwidth_gbs="
                         f"{bandwidth_gbs} > 0")
    lat = base.latency_s if latency_us is None else latency_us * 1e-6
    bw = base.bandwidth_bytes_s if bandwidth_gbs is None else bandwidth_gbs * 1e9
    custom = latency_us is not None or bandwidth_gbs is not None
    return Link(f"{name} ({lat * 1e6:g} us, {bw / 1e9:g} GB/s)" if custom else name, lat, bw)


def simulate(proxy: Proxy, ln: Link | FittedLink, scale: int = 1) -> dict:
    """{"iteration_s", "compute_s", "exposed_s", "comm_s"} of one iteration (module doc);
    ``scale``: every message carries 1/scale of its floats, as ``replay --scale`` sends."""
    lay = proxy.layout
    stages = [lay.rank(s, 0, 0) for s in range(lay.pipeline)]
    pc = {r: 0 for r in stages}
    clock = {r: 0.0 for r in stages}
    link_free = {r: 0.0 for r in stages}
    busy = {r: 0.0 for r in stages}        # seconds of link use
    arrivals: dict = {}

    def message(e) -> float:
        nbytes = max(1, e.count // scale) * FLOAT_BYTES
        if isinstance(e, Collective):
            return ln.time(e.op, nbytes, lay.size(e.group))
        return len(e.sends) * ln.time("p2p", nbytes, 2)

    while any(pc[r] < len(proxy.program(r)) for r in stages):
        progressed = False
        for r in stages:
            prog = proxy.program(r)
            while pc[r] < len(prog):
                e = prog[pc[r]]
                if isinstance(e, P2P) and e.group == "pipeline" and e.recvs:
                    s = lay.coords(r)[0]
                    keys = [(e.tag, src, s) for src in e.recvs]
                    if any(k not in arrivals for k in keys):
                        break              # its sender has not got there yet
                    clock[r] = max([clock[r]] + [arrivals.pop(k) for k in keys])
                if isinstance(e, Compute):
                    clock[r] += e.seconds
                elif isinstance(e, Wait):
                    clock[r] = max(clock[r], link_free[r])
                elif isinstance(e, (Collective, P2P)) and (not isinstance(e, P2P) or e.sends):
                    dt = message(e)
                    start = max(clock[r], link_free[r])
                    link_free[r] = start + dt
                    busy[r] += dt
                    if isinstance(e, P2P) and e.group == "pipeline":
                        s = lay.coords(r)[0]
                        for dst in e.sends:
                            arrivals[(e.tag, s, dst)] = start + dt
                    if not isinstance(e, Collective) or e.blocking:
                        clock[r] = start + dt
                pc[r] += 1
                progressed = True
        if not progressed:
            raise RuntimeError("the proxy deadlocks: a pipeline receive has no matching send")
    end = max(clock[r] for r in stages)
    compute = max(sum(e.seconds for e in proxy.program(r) if isinstance(e, Compute))
                  for r in stages)
    return {"iteration_s": end, "compute_s": compute, "exposed_s": end - compute,
            "comm_s": max(busy.values())}


def extrapolate(build_kwargs: dict, nodes, links) -> list[dict]:
    """Rows (nodes, link, iteration_s, …) for each node count the layout admits."""
    fixed = build_kwargs.get("tensor", 1) * build_kwargs.get("pipeline", 1)
    rows = []
    for n in nodes:
        if n < 1 or n % fixed:
            raise ValueError(f"{n} nodes: must be a multiple of tensor·pipeline = {fixed}")
        kw = dict(build_kwargs, data=n // fixed)
        try:
            proxy = build(**kw)
        except ValueError as exc:
            rows.append({"nodes": n, "error": str(exc)})
            continue
        for ln in links:
            rows.append({"nodes": n, "link": ln.name, **simulate(proxy, ln)})
    return rows


def report(rows: list) -> str:
    lines = [f"{'nodes':>6} {'link':<34} {'iteration ms':>13} {'exposed ms':>11} {'comm ms':>9}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['nodes']:>6} (not possible: {r['error']})")
            continue
        lines.append(f"{r['nodes']:>6} {r['link']:<34} {r['iteration_s'] * 1e3:>13.2f} "
                     f"{r['exposed_s'] * 1e3:>11.2f} {r['comm_s'] * 1e3:>9.2f}")
    return "\n".join(lines)


def plot(rows: list, path: str, title: str = "") -> str:
    """Iteration time (solid) and exposed communication (dashed) against nodes, per link;
    no exposed point where nothing is exposed (0 has no place on a log axis)."""
    # heavy: only a plot loads pyplot; the backend stays the process's (the CLI picks Agg)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    fig, ax = plt.subplots(figsize=(7, 5), layout="constrained")
    for i, name in enumerate(dict.fromkeys(r["link"] for r in rows if "link" in r)):
        pts = [r for r in rows if r.get("link") == name]
        xs = [r["nodes"] for r in pts]
        ax.plot(xs, [r["iteration_s"] for r in pts], "o-", color=f"C{i}", label=name)
        exposed = [(x, r["exposed_s"]) for x, r in zip(xs, pts) if r["exposed_s"] > 0]
        ax.plot([x for x, _ in exposed], [e for _, e in exposed], "x--", color=f"C{i}", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="nodes (one rank each)", ylabel="seconds",
           title=title or "extrapolated iteration (solid) and exposed communication (dashed)")
    handles, _ = ax.get_legend_handles_labels()
    # under the axes: inside, it hid the lowest lines (CosmoFlow's exposed communication)
    fig.legend(handles=[*handles, Line2D([], [], color="k", marker="o", label="iteration"),
                        Line2D([], [], color="k", marker="x", ls="--", lw=1,
                               label="exposed communication (none: not drawn)")],
               fontsize=8, ncol=3, loc="outside lower center")
    save_figure(fig, path)
    plt.close(fig)
    return path
