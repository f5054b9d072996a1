// See cluster/launcher.hpp.
#include "fp8kit/cluster/launcher.hpp"

#include <cerrno>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fp8kit/io/sink.hpp"

namespace fp8kit::cluster {
namespace {

std::string comm_of(long pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(f, name);
    return name;
}

long parent_of(long pid) {
    // /proc/PID/stat: "pid (comm) state ppid ...": the comm may hold spaces and parentheses, so
    // the fields are counted after the last ')'.
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto close = s.rfind(')');
    if (close == std::string::npos || close + 4 >= s.size()) return 0;
    try {
        return std::stol(s.substr(close + 4));  // after ") S "
    } catch (...) {
        return 0;
    }
}

bool is_launcher(const std::string& name) {
    return name == "mpirun" || name == "mpiexec" || name == "orterun" || name == "prterun" || name == "mpiexec.hydra";
}

}  // namespace

LauncherStdout launcher_stdout() {
    LauncherStdout out;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    long pid = ::getppid();
    for (int depth = 0; pid > 1 && depth < 8; ++depth, pid = parent_of(pid)) {
        if (!is_launcher(comm_of(pid))) continue;
        const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
        if (pidfd < 0) return out;
        out.fd = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, 1, 0));
        const int e = errno;
        ::close(pidfd);
        if (out.fd < 0) out.closed = e == EBADF;
        return out;
    }
#endif
    return out;
}

bool write_to_launcher_stdout() {
    const auto l = launcher_stdout();
    if (l.fd >= 0) io::adopt_stdout(l.fd);
    if (!l.closed) return false;
    io::set_stdout_closed();
    io::adopt_stdout(io::open_write_refusing());
    return true;
}

}  // namespace fp8kit::cluster
