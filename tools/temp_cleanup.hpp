// A temporary file that must not outlive the process: `table -o FILE` writes FILE's contents to a
// hidden `.FILE.XXXXXX.partial` and renames it at the end. A run stopped by Ctrl-C (SIGINT),
// SIGTERM, SIGHUP or SIGQUIT would otherwise leave that file behind, since destructors do not
// run when a signal kills the process. While a path is registered, those signals unlink it, then
// kill the process with the same signal (so the exit status still says which signal it was).
#pragma once

namespace fp8kit::cli {

// mkostemps(tmpl, suffix_len, flags) with the path registered (at most one at a time) before any
// of the signals above can run the handler in this thread: installs the handlers on first use,
// holds the signals across the creation and the registration. Returns mkostemps' result (a
// descriptor, or -1 with errno set). A path too long for the handler's fixed buffer is created
// but not registered (the caller's own cleanup still runs on errors).
int make_registered_temp(char* tmpl, int suffix_len, int flags);

// Forgets the registered path. Signals arriving meanwhile are held until it is forgotten.
void forget_temp_file();

// Runs `rename(from, to)`, then forgets the registered path: a signal either arrives before the
// rename (and removes the temporary) or after it (and leaves FILE complete). Returns rename's
// result (errno set on failure).
int rename_and_forget(const char* from, const char* to);

}  // namespace fp8kit::cli
