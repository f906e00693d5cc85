"""Beyond one process: communication proxies (``proxies``), their MPI replay (``replay``),
collective benchmarks with an α-β model and extrapolation (``collectives``)."""
