"""Training on several processes: StarPU-MPI tile ownership (``mpi``, attached by
``Runtime.start`` under mpirun), the ``mpirun`` line (``mpirun``) and the launcher of
``nntile-lab train --ranks N`` (``launch``)."""
