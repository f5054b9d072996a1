# Sourced by the MPI tests: how they launch Open MPI on CI's machine.
# CI runs as root on 2 cores: Open MPI refuses root and more ranks than cores unless told.
# The ranks of these tests share one host, so only the shared-memory and self transports are
# opened (btl self,vader with the ob1 layer): no network transport is probed at each start, which
# took a third of every `mpirun -n 2` here (0.55 -> 0.37 s on the 2-core x86 machine, Open MPI 4.1.4).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
# When a rank exits nonzero (most cases of output_lost.sh), mpirun kills the job's other processes
# with SIGTERM and waits this many seconds before SIGKILL; every such launch took 2.2 s instead of
# 0.2 s. Only fp8kit's own exit status and lines are checked, which the failing rank gives itself.
export OMPI_MCA_odls_base_sigkill_timeout=0
# Open MPI's session folder (ompi.<host>.<uid>) goes in the test's own folder $T, removed by the
# test: with no SIGKILL wait above, a killed daemon leaves it behind in TMPDIR.
OMPI_MCA_orte_tmpdir_base=${T:?mpi_env.bash needs T, the test's temporary folder}
export OMPI_MCA_orte_tmpdir_base
