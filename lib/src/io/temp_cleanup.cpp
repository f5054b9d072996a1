// Async-signal-safety (POSIX.1-2017, 2.4.3 "Signal Actions"): the handler calls only unlink(),
// signal() and raise(), all on the list of async-signal-safe functions, and reads only a static
// buffer and a volatile sig_atomic_t flag; the path is copied into the buffer before the flag is
// set, and the flag cleared before the buffer changes.
#include "temp_cleanup.hpp"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

namespace fp8kit::io::detail {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
char g_path[4096];
volatile sig_atomic_t g_registered = 0;

extern "C" void remove_temp_and_die(int sig) {
    if (g_registered) ::unlink(g_path);
    g_registered = 0;
    ::signal(sig, SIG_DFL);
    ::raise(sig);  // delivered when the handler returns (the signal is blocked while it runs)
}

sigset_t handled_set() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : kSignals) sigaddset(&set, s);
    return set;
}

bool g_enabled = false;

}  // namespace

void enable_temp_cleanup() {
    if (g_enabled) return;
    g_enabled = true;
    for (int s : kSignals) {
        struct sigaction old {};
        // A signal the shell set to be ignored (nohup, a background job's SIGINT) stays ignored.
        if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        struct sigaction sa {};
        sa.sa_handler = remove_temp_and_die;
        sa.sa_mask = handled_set();  // one handler at a time
        ::sigaction(s, &sa, nullptr);
    }
}

int make_registered_temp(char* tmpl, int suffix_len, int flags) {
    if (!g_enabled || g_registered) return ::mkostemps(tmpl, suffix_len, flags);
    const sigset_t set = handled_set();
    sigset_t old;
    ::pthread_sigmask(SIG_BLOCK, &set, &old);  // table creates it before starting other threads
    const int fd = ::mkostemps(tmpl, suffix_len, flags);
    const size_t n = fd >= 0 ? ::strlen(tmpl) : 0;
    if (fd >= 0 && n < sizeof g_path) {
        g_registered = 0;
        ::memcpy(g_path, tmpl, n + 1);
        g_registered = 1;
    }
    const int saved = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = saved;
    return fd;
}

void forget_temp_file(const char* path) {
    if (g_registered && ::strcmp(g_path, path) == 0) g_registered = 0;
}

int rename_and_forget(const char* from, const char* to) {
    const sigset_t set = handled_set();
    sigset_t old;
    // Held in this thread only: the process has other threads (table's writer, OpenMP's), and a
    // signal may still run the handler on one of them during the rename. That is harmless too:
    // before the rename the handler removes the temporary (the rename then fails, and the process
    // dies of the signal anyway); after it, the temporary's name no longer exists.
    ::pthread_sigmask(SIG_BLOCK, &set, &old);
    const int r = ::rename(from, to);
    if (r == 0 && g_registered && ::strcmp(g_path, from) == 0) g_registered = 0;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return r;
}

}  // namespace fp8kit::io::detail
