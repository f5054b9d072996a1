// The launcher's own standard output, for the rank that writes the report. Under `mpirun` a
// rank's standard output is a pipe or terminal to the launcher, which copies it to its own and
// ignores a failure there (Open MPI 4: `mpirun -n 1 fp8kit inspect --json > /dev/full` would exit
// 0 with the report lost). The writing rank writes to the launcher's standard output itself
// instead when it can reach it: the launcher is an ancestor process on the same host and lets
// this process take a copy of its descriptor (pidfd_getfd, Linux 5.6; same user, or root).
#pragma once

namespace fp8kit::cluster {

struct LauncherStdout {
    int fd = -1;          // a new descriptor for the same open file as the launcher's descriptor 1
    bool closed = false;  // the launcher was found and its standard output is closed
};

// Looks up the nearest ancestor named mpirun, mpiexec, orterun, prterun or mpiexec.hydra (its
// /proc/PID/comm) and copies its descriptor 1. {-1, false} when none is found or it cannot be
// copied (another host, another user, a kernel without pidfd_getfd): the launcher's copy is then
// what the report goes through, unchecked.
LauncherStdout launcher_stdout();

// For the rank that writes the report: makes descriptor 1 the launcher's standard output
// (launcher_stdout, io::adopt_stdout) so that a failure there is seen. When the launcher's
// standard output is closed, descriptor 1 becomes /dev/full (as for a closed one of our own) and
// io::set_stdout_closed is called; returns true then, false otherwise.
bool write_to_launcher_stdout();

}  // namespace fp8kit::cluster
