"""A point: one spec, what to measure on it, and the caps it runs under.

``Point.key()`` names it in a store: a digest of everything that decides the numbers —
the kind, the measurement and its options, the spec, the memory cap, and the machine (CPU,
ISA, cores; ``facts.machine_id``). The time limit is not in it: it decides only whether a
point finishes (a point that timed out runs again under a longer limit: ``runner``).
``inputs`` are values the measurement uses that do not change what is measured (the sgemm
peak an MFU divides by): not part of the key either; nor are ``imports``, modules the point's
process imports before it reads the spec (one that registers a user's model, so that the spec
naming it is valid there too).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nntile_lab.engine import measures
from nntile_lab.engine.facts import digest, json_safe, machine_id
from nntile_lab.spec import ExperimentSpec

# a point still running after this is a record with status "timeout"
DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Caps:
    """What a point may use. ``memory_mb``: RAM above the process's resident size once the
    measurement has loaded what it loads lazily (an RSS watchdog ends the process over it:
    status "oom"); ``timeout_s``: wall seconds of the point's process (status "timeout")."""

    memory_mb: float | None = None
    timeout_s: float | None = DEFAULT_TIMEOUT_S

    def __post_init__(self):
        for name in ("memory_mb", "timeout_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and 0 < v < float("inf")):
                raise ValueError(f"caps.{name}={v!r} must be a positive number of "
                                 f"{'MiB' if name == 'memory_mb' else 'seconds'} or None")

    def to_dict(self) -> dict:
        return {"memory_mb": self.memory_mb, "timeout_s": self.timeout_s}


@dataclass(frozen=True)
class Point:
    """``measure`` (a name of ``engine.measures`` or "module:function") of ``spec`` with
    ``options``, under ``caps``; its record is of ``kind``."""

    measure: str
    spec: ExperimentSpec | None = None
    options: dict = field(default_factory=dict)
    caps: Caps = Caps()
    kind: str = "point"
    inputs: dict = field(default_factory=dict)
    imports: tuple = ()

    def __post_init__(self):
        measures.get(self.measure)   # an unknown measurement: ValueError now, not in a child
        if self.spec is not None and not isinstance(self.spec, ExperimentSpec):
            raise TypeError(f"a point's spec is an ExperimentSpec or None, got "
                            f"{type(self.spec).__name__}")

    def identity(self) -> dict:
        return json_safe({"kind": self.kind, "measure": self.measure,
                          "spec": None if self.spec is None else self.spec.to_dict(),
                          "options": self.options, "memory_mb": self.caps.memory_mb,
                          "machine": machine_id()})

    def key(self) -> str:
        """16 hex digits naming the point on this machine (module docstring)."""
        return digest(self.identity())

    def job(self) -> dict:
        """What the point's process needs, as JSON."""
        return json_safe({"measure": self.measure, "options": self.options,
                          "inputs": self.inputs, "imports": list(self.imports),
                          "caps": self.caps.to_dict(),
                          "spec": None if self.spec is None else self.spec.to_dict()})
