# Sourced by the MPI tests: how they launch Open MPI on CI's machine.
# CI runs as root on 2 cores: Open MPI refuses root and more ranks than cores unless told.
# The ranks of these tests share one host, so only the shared-memory and self transports are
# opened (btl self,vader with the ob1 layer): no network transport is probed at each start, which
# took a third of every `mpirun -n 2` here (0.55 -> 0.37 s on the 2-core x86 machine, Open MPI 4.1.4).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
# OMPI_MCA_odls_base_sigkill_timeout stays at Open MPI's default. Set to 0 (no wait between the
# SIGTERM and the SIGKILL of a failed job's other processes), Open MPI 4.1.4's mpirun itself
# crashed in PMIx_server_finalize after an MPI_Abort in 5 of 30 launches on the 2-core x86 machine
# (exit 139; 0 of 40 at the default), left its session folder behind and once hung a test.
# Everything Open MPI and PMIx write (the session folder ompi.<host>.<uid>/pid.<n> of each mpirun,
# PMIx's shared-memory stores) goes in the test's own folder $T, removed by the test: a crashed
# launcher leaves its folder behind, and two tests' mpiruns at once
# (ctest -j2) shared one ompi.<host>.<uid> in TMPDIR. OMPI_MCA_orte_tmpdir_base is not enough:
# Open MPI 4.1.4's mpirun still made pid.<n> folders in TMPDIR with it set.
: "${T:?mpi_env.bash needs T, the temporary folder of the test}"
export TMPDIR="$T"
# Each launch is bounded: a launch that hangs fails its test within two minutes (exit 124, named in
# the test's FAIL line) instead of holding the whole ctest run (CI's limit is 90 minutes for all).
mpirun_bounded() { timeout -k 5 120 "$MPIEXEC" "$@"; }
