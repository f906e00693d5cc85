"""A communication proxy: what every rank does in one training iteration.

A *layout* places ``world = pipeline · data · tensor`` ranks on a 3-D grid, tensor ranks
fastest (they share a node in practice)::

    rank = (stage · data + replica) · tensor + shard

A *group* is one axis of that grid seen from a rank: ``"tensor"`` (same stage and replica),
``"data"`` (same stage and shard), ``"pipeline"`` (same replica and shard) or ``"world"``.

A rank's *program* is a list of events: :class:`Compute` (emulated kernel time),
:class:`Collective` (on a group, blocking or not), :class:`P2P` (sends and receives to
group-local peers) and :class:`Wait` (for the outstanding non-blocking collectives).
Counts are in floats (fp32), as in dnn-distributed's proxies, so sizes compare directly.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

GROUPS = ("tensor", "data", "pipeline", "world")
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall")
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Layout:
    """``data`` replicas × ``tensor`` shards × ``pipeline`` stages."""

    data: int = 1
    tensor: int = 1
    pipeline: int = 1

    def __post_init__(self):
        for name in ("data", "tensor", "pipeline"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r} (--{name}) must be a whole number >= 1")

    @property
    def world(self) -> int:
        return self.data * self.tensor * self.pipeline

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(stage, replica, shard) of ``rank``."""
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} outside 0..{self.world - 1}")
        shard = rank % self.tensor
        replica = (rank // self.tensor) % self.data
        stage = rank // (self.tensor * self.data)
        return stage, replica, shard

    def rank(self, stage: int, replica: int, shard: int) -> int:
        return (stage * self.data + replica) * self.tensor + shard

    def size(self, group: str) -> int:
        return {"tensor": self.tensor, "data": self.data, "pipeline": self.pipeline,
                "world": self.world}[group]

    def color(self, group: str, rank: int) -> tuple[int, int]:
        """(colour, key) for ``MPI_Comm_split``: ranks with one colour form the group."""
        s, d, t = self.coords(rank)
        if group == "tensor":
            return s * self.data + d, t
        if group == "data":
            return s * self.tensor + t, d
        if group == "pipeline":
            return d * self.tensor + t, s
        return 0, rank

    def group_rank(self, group: str, rank: int) -> int:
        return self.color(group, rank)[1]


@dataclass(frozen=True)
class Compute:
    label: str
    seconds: float


@dataclass(frozen=True)
class Collective:
    """``count`` floats: allreduce = the buffer; allgather = what each rank contributes;
    reduce_scatter = what each rank keeps; alltoall = a rank's whole send buffer."""

    label: str
    op: str
    count: int
    group: str
    blocking: bool = True


@dataclass(frozen=True)
class P2P:
    """Send ``count`` floats to each of ``sends`` and receive as much from each of ``recvs``
    (group-local ranks of ``group``), then wait for all of them."""

    label: str
    count: int
    group: str
    sends: tuple[int, ...] = ()
    recvs: tuple[int, ...] = ()
    tag: int = 0


@dataclass(frozen=True)
class Wait:
    label: str = "wait for gradient all-reduces"


@dataclass(frozen=True)
class Message:
    """One distinct message of the proxy (what the tests compare with the proxies' constants)."""

    label: str
    op: str            # allreduce, allgather, reduce_scatter, alltoall, p2p
    count: int         # floats
    group: str
    per_iteration: int  # how often one rank of ``ranks`` issues it per iteration
    ranks: str = "all"  # which ranks issue it ("all", "stage 0", …)


@dataclass
class Proxy:
    model: str
    config: str
    layout: Layout
    messages: list[Message]
    programs: dict[int, list] = field(repr=False, default_factory=dict)
    notes: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)

    def program(self, rank: int) -> list:
        return self.programs[rank]

    def counts(self, op: str | None = None, label: str | None = None) -> list[int]:
        """Message sizes in floats, optionally filtered by op and a label substring."""
        return [m.count for m in self.messages
                if (op is None or m.op == op) and (label is None or label in m.label)]

    def bytes_per_rank(self) -> dict[int, int]:
        """Payload bytes each rank hands to MPI in one iteration (sends + collective buffers)."""
        return {r: sum(event_bytes(e) for e in prog) for r, prog in self.programs.items()}

    def compute_seconds(self) -> dict[int, float]:
        return {r: sum(e.seconds for e in prog if isinstance(e, Compute))
                for r, prog in self.programs.items()}

    def to_dict(self) -> dict:
        return {"model": self.model, "config": self.config, "layout": asdict(self.layout),
                "world": self.layout.world, "params": self.params,
                "messages": [asdict(m) for m in self.messages],
                "bytes_per_rank": self.bytes_per_rank(),
                "compute_s_per_rank": self.compute_seconds(), "notes": self.notes}

    def report(self) -> str:
        lay = self.layout
        lines = [f"{self.model} {self.config}: data={lay.data} tensor={lay.tensor} "
                 f"pipeline={lay.pipeline} (world {lay.world})"]
        lines += [f"  {k}: {v}" for k, v in self.params.items()]
        lines.append(f"  {'message':<44} {'op':<15} {'group':<9} {'floats':>12} "
                     f"{'MiB':>9} {'x/iter':>6}  ranks")
        for m in self.messages:
            lines.append(f"  {m.label:<44} {m.op:<15} {m.group:<9} {m.count:>12} "
                         f"{m.count * FLOAT_BYTES / 2**20:>9.2f} {m.per_iteration:>6}  {m.ranks}")
        per_rank = self.bytes_per_rank()
        comp = self.compute_seconds()
        lines.append(f"  bytes per rank per iteration: min {min(per_rank.values()) / 2**20:.1f} "
                     f"MiB, max {max(per_rank.values()) / 2**20:.1f} MiB; modelled compute "
                     f"max {max(comp.values()) * 1e3:.2f} ms")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def event_bytes(e) -> int:
    if isinstance(e, Collective):
        return e.count * FLOAT_BYTES
    if isinstance(e, P2P):
        return e.count * FLOAT_BYTES * len(e.sends)
    return 0


def summarize(programs: dict[int, list], describe) -> list[Message]:
    """Distinct (label, op, count, group) messages with how often a rank issues them.

    ``describe(rank) -> str`` names the ranks class (e.g. "stage 0") for the table."""
    seen: dict[tuple, Message] = {}
    for rank, prog in programs.items():
        per: dict[tuple, int] = {}
        for e in prog:
            if isinstance(e, Collective):
                key = (e.label, e.op, e.count, e.group)
            elif isinstance(e, P2P) and e.sends:
                key = (e.label, "p2p", e.count, e.group)
            else:
                continue
            per[key] = per.get(key, 0) + 1
        who = describe(rank)
        for key, n in per.items():
            if key not in seen:
                seen[key] = Message(*key, per_iteration=n, ranks=who)
            elif who not in seen[key].ranks.split(", "):
                old = seen[key]
                seen[key] = Message(*key, per_iteration=max(n, old.per_iteration),
                                    ranks=f"{old.ranks}, {who}")
    return list(seen.values())
