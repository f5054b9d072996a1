// Internal: what every HDF5 reading routine shares: an owning handle, libhdf5's error printing
// switched off on the calling thread, and libhdf5's most specific messages for fp8kit's own.
#pragma once

#include <hdf5.h>

#include <string>

namespace fp8kit::dump::detail {

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
public:
    using Closer = herr_t (*)(hid_t);
    Handle() = default;
    Handle(hid_t id, Closer close) : id_(id), close_(close) {}
    Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
    Handle& operator=(Handle&& o) noexcept {
        if (this != &o) {
            reset();
            id_ = o.id_;
            close_ = o.close_;
            o.id_ = -1;
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { reset(); }
    void reset() {
        if (id_ >= 0 && close_) close_(id_);
        id_ = -1;
    }
    hid_t get() const { return id_; }
    bool ok() const { return id_ >= 0; }

private:
    hid_t id_ = -1;
    Closer close_ = nullptr;
};

// Switches off libhdf5's automatic error printing (the "HDF5-DIAG: Error detected ..." stack on
// stderr) for the calling thread. The error stack and its auto-print setting are per thread in
// libhdf5's thread-safe build (H5E.c: H5E__get_my_stack, "H5TS_get_thread_local_value"), so every
// thread that calls libhdf5 calls this first; it is cheap after the first call on a thread.
void silence_hdf5();

// The most specific messages on the calling thread's HDF5 error stack (then cleared), e.g.
// "truncated file: eof = ...".
std::string hdf5_detail();

}  // namespace fp8kit::dump::detail
