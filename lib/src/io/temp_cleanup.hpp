// A temporary file that must not outlive the process: an OutputFile (io/sink.hpp) writes FILE's
// contents to a hidden `.FILE.XXXXXX.partial` and renames it at the end. A run stopped by Ctrl-C
// (SIGINT), SIGTERM, SIGHUP or SIGQUIT would otherwise leave that file behind, since destructors
// do not run when a signal kills the process. Once enable_temp_cleanup() was called (the CLI does;
// a Python host keeps its own handlers), while a path is registered, those signals unlink it, then
// kill the process with the same signal (so the exit status still says which signal it was).
#pragma once

namespace fp8kit::io::detail {

// Installs the handlers (once); until then make_registered_temp only creates the file.
void enable_temp_cleanup();

// mkostemps(tmpl, suffix_len, flags) with the path registered (at most one at a time) before any
// of the signals above can run the handler in this thread: installs the handlers on first use,
// holds the signals across the creation and the registration (when enabled). At most one path is
// registered: while one is, a second temporary is created unregistered. Returns mkostemps' result (a
// descriptor, or -1 with errno set). A path too long for the handler's fixed buffer is created
// but not registered (the caller's own cleanup still runs on errors).
int make_registered_temp(char* tmpl, int suffix_len, int flags);

// Forgets `path` when it is the registered one.
void forget_temp_file(const char* path);

// Runs `rename(from, to)`, then forgets `from` when it is the registered path: a signal either arrives before the
// rename (and removes the temporary) or after it (and leaves FILE complete). Returns rename's
// result (errno set on failure).
int rename_and_forget(const char* from, const char* to);

}  // namespace fp8kit::io::detail
