"""Which learning-rate schedule a resumed run follows.

A checkpoint records its run's schedule. Resuming with options that give another one —
most often a larger ``--steps``, which stretches the cosine — keeps the recorded schedule
(the steps beyond its end continue its tail, at its floor) and says so; ``--reschedule``
switches to the new one and says what changes. A run never jumps to another rate
silently: 300 → 600 steps would otherwise take the rate from ~1e-4 back up to ~6e-4.
"""
from __future__ import annotations

from nntile_lab.train.schedule import describe, from_record


def resumed_schedule(state: dict, where, planned, reschedule: bool, steps: int):
    """``(schedule, message)``: the one to train with and what to tell the user (None when
    nothing changes). ``state``: the checkpoint's; ``planned``: these options' schedule."""
    saved = (state.get("settings") or {}).get("schedule")
    step = state.get("step", 0)
    if saved is None:
        if reschedule:
            return planned, None
        raise ValueError(f"checkpoint {where} does not record its learning-rate schedule "
                         "(it was written before nntile_lab kept it): pass --reschedule to "
                         f"continue with the schedule these options give ({describe(planned)})")
    original = from_record(saved)
    if original == planned:
        return planned, None
    first = step   # the 0-based optimizer step the resumed run starts with
    if reschedule:
        return planned, (f"--reschedule: the learning-rate schedule changes from "
                         f"{describe(original)} to {describe(planned)}; step {first + 1} "
                         f"gets lr {planned(first):.3g} instead of {original(first):.3g}")
    tail = (f"steps {first + 1}–{steps} continue its tail (lr {original(first):.3g}"
            + (f" … {original(steps - 1):.3g})" if steps - 1 > first else ")"))
    return original, (f"keeping the checkpoint's learning-rate schedule ({describe(original)}):"
                      f" {tail}. These options give {describe(planned)}, which would set lr "
                      f"{planned(first):.3g} at step {first + 1}: pass --reschedule to use it")
