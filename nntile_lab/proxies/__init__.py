"""Communication of distributed training without training: the messages one iteration of
GPT-2/GPT-3/CosmoFlow/DLRM sends (``models`` builds a ``program.Proxy`` per layout: every
rank's program of compute, collectives and point-to-point messages), their replay with
mpi4py under mpirun (``replay``), MPI collective benchmarks with an α-β model
(``collectives``) and its extrapolation to more nodes (``extrapolate``). Nothing here runs
StarPU: the training itself over StarPU-MPI lives in ``nntile_lab.parallel``."""
