// Streaming readers for tensor dumps (HDF5 and safetensors): list the tensors of one or more
// files, then read each one in bounded chunks, so a dump larger than memory can be analysed.
//
// Every problem with the input becomes a Problem record (file, dataset, message) rather than an
// exception out of the listing, so a caller can analyse the good tensors and report the bad ones
// at the end. Reading one tensor throws DumpError (naming file and dataset) when it fails.
//
// Use one Dump/Source from one thread at a time: it calls libhdf5 from that thread only, and reads
// and decodes chunks on the process's thread pool (parallel/pool.hpp) inside read().
// Only the files named are read (ReadOptions::allow_external_in_dump_folder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/numerics/roles.hpp"

namespace fp8kit::dump {

// What a tensor is in training, its names, the parser of its spellings and the guess from a
// tensor's name: numerics/roles.hpp (one definition for the library, the CLI and Python).
using numerics::guess_role;
using numerics::name;
using numerics::parse_role;
using numerics::Role;
// The step named by the innermost path component that carries one: step_12, step12, step-12,
// iter_000012, iter12, iteration=12, it_12 (case-insensitive).
std::optional<std::int64_t> guess_step(std::string_view path);

// What the stored bits mean.
// Codes of the formats below e8m0 (FP4 / FP6 / the other ml_dtypes types) are stored one per
// byte in the low bits, as ml_dtypes arrays are (float4_e2m1fn, float6_e2m3fn, ...).
enum class DType : std::uint8_t {
    f64,
    f32,
    f16,
    bf16,
    e4m3,
    e5m2,
    e4m3fnuz,
    e5m2fnuz,
    e8m0,
    e2m1,
    e2m3,
    e3m2,
    e3m4,
    e4m3b11fnuz,
    e4m3ieee
};
std::string_view name(DType d);  // "f64", ..., "bf16", "e4m3", ... (the names of names.hpp)
std::optional<Format> fp8_format(DType d);
// The type chunks of such a tensor arrive in: itself for f64/f32/f16/bf16; f32 for FP8 codes
// (every FP8 value is exactly a float32; decoded with emu::decode).
Wide delivered_as(DType d);

struct TensorInfo {
    std::string file;                  // as given to open_source / Dump
    std::string name;                  // HDF5: dataset path without leading '/'; safetensors: key
    std::vector<std::uint64_t> shape;  // empty for an HDF5 scalar
    std::uint64_t numel = 0;
    std::string storage;  // how it is stored: "float32", "uint16", "opaque2", "uint8", "BF16", ...
    DType dtype = DType::f32;
    Wide wide = Wide::f32;  // == delivered_as(dtype)
    std::optional<std::int64_t> step;
    bool step_guessed = false;  // from the name, not from a `step` attribute
    Role role = Role::unknown;
    bool role_guessed = false;  // from the name, not from a `role` attribute
};

// A run of consecutive elements of a tensor, in row-major order. `bits` holds `count` values of
// `wide` as raw little-endian bits (f64: uint64, f32: uint32, f16/bf16: uint16); valid only
// during the callback.
struct Chunk {
    Wide wide;
    const void* bits;
    std::size_t count;
    std::uint64_t first;  // index of bits[0] in the flattened tensor
    // read_runs only: > 1 when this chunk is one value repeated (count is then 1): bits[0] stands
    // for elements first .. first + repeat - 1. read() always delivers repeat == 1.
    std::uint64_t repeat = 1;
};
using ChunkFn = std::function<void(const Chunk&)>;
// read_into: elements [first, first + count) of the destination are in place. Called on a pool
// worker (parallel/pool.hpp), possibly on several threads at once, once per element; the pieces
// are fixed by the file's layout and the read budget, never by the thread count.
using PlacedFn = std::function<void(std::uint64_t first, std::size_t count)>;

// A problem with the input. `name` is empty when the whole file is affected.
struct Problem {
    std::string file, name, message;
    std::string describe() const;  // "file: dataset: message" / "file: message"
};

// A problem as every JSON report writes it: {"file", "name", "message"} (the items of "skipped"
// and "errors"; nlohmann finds it by argument-dependent lookup).
void to_json(nlohmann::json& j, const Problem& p);

// What the readers skipped on purpose (Source::notes(), Dump::notes()). The one list every command
// reports: a "note: skipped ..." line in its text (describe(), every untrusted part through
// io::quoted), an object {"file", "name", "message"} in its JSON's "skipped", and in Python the
// same dicts and a UserWarning.
std::vector<Problem> skipped(const std::vector<Problem>& notes);

struct DumpError : std::runtime_error {
    DumpError(std::string file, std::string name, const std::string& message);
    std::string file, name, message;
};

struct ReadOptions {
    // Largest chunk delivered, in bytes of the delivered type. Memory in use while reading is a
    // small multiple of this, plus (threads + 2) x (stored + decoded HDF5 chunk) for the chunk
    // tasks in flight (parallel/pool.hpp), plus HDF5's chunk cache (capped at hdf5_cache_bytes)
    // where libhdf5 reads.
    std::size_t chunk_bytes = std::size_t(16) << 20;
    std::size_t hdf5_cache_bytes = std::size_t(128) << 20;
    // HDF5 files are listed first in a child process, because libhdf5 1.10 can crash or loop
    // forever on corrupt metadata; a child that crashes, or reports no progress for this long,
    // makes the file an error and the file is not listed here. 0: no child process.
    // 0 also suits a process that must not fork() (an MPI rank: docs/dumps.md).
    unsigned hdf5_listing_timeout_ms = 20000;
    // Read only the files named: HDF5 datasets whose bytes live in other files (external raw
    // storage, virtual datasets) are skipped with a note saying what they point at, and external
    // links are never followed. true: external files and VDS sources that are regular files inside
    // the dump's own folder are read (never anything elsewhere).
    bool allow_external_in_dump_folder = false;
    // The work a header may demand: a tensor claiming more elements, or HDF5 chunks of more bytes
    // (each is decoded whole), is an error naming the dataset and the size, before anything is read.
    std::uint64_t max_elements = std::uint64_t(1) << 34;      // 16 Gi elements (64 GiB of float32)
    std::uint64_t max_chunk_bytes = std::uint64_t(64) << 20;  // 64 MiB
};

// One open file.
class Source {
public:
    virtual ~Source() = default;
    const std::string& path() const { return path_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const std::vector<Problem>& errors() const { return errors_; }  // tensors that cannot be read
    const std::vector<Problem>& notes() const { return notes_; }    // datasets skipped on purpose
    // Streams tensor `t` (one of tensors()) in chunks. Throws DumpError.
    virtual void read(const TensorInfo& t, const ChunkFn& fn) = 0;
    // As read(), but a run of one repeated value may arrive as one Chunk with repeat > 1, in O(1)
    // whatever its length: an HDF5 chunked dataset none of whose chunks was ever written (its
    // fill value). For consumers whose result for n copies of a value is computed directly
    // (a maximum; statistics through times()); the others call read().
    void read_runs(const TensorInfo& t, const ChunkFn& fn);
    // Reads tensor `t` whole into `dest` (t.numel elements of t.wide), and calls `placed` for
    // each piece as it lands, so a consumer can work on pieces (a maximum, say) while later ones
    // are read. Where the reader decodes chunks itself (HDF5 chunked and contiguous data stored
    // as delivered), pool workers pread and decode straight into `dest` and call `placed`
    // themselves: no copy on the calling thread. Elsewhere read() feeds it (copy, then `placed`
    // on this thread). Throws DumpError.
    virtual void read_into(const TensorInfo& t, void* dest, const PlacedFn& placed);
    // Tensor `t`'s elements (t.numel of t.wide) in place, mapped read-only from the file, when it
    // is stored there contiguously as delivered and is large enough for mapping to pay (HDF5
    // contiguous datasets, safetensors tensors of float types); null otherwise (then read or
    // read_into). No copy at all: the consumer reads the page cache.
    virtual std::shared_ptr<const void> map(const TensorInfo& t);

protected:
    bool runs_ = false;  // read_runs is in progress: read() may deliver repeat > 1
    std::string path_;
    std::vector<TensorInfo> tensors_;
    std::vector<Problem> errors_, notes_;
};

// Opens an HDF5, safetensors or torch.save file (TransformerEngine DumpTensors: io/te_debug.hpp;
// told apart by content, not by name) and lists its tensors.
// Throws DumpError (with an empty dataset name) when the file as a whole cannot be used.
std::unique_ptr<Source> open_source(const std::string& path, const ReadOptions& opts = {});
bool is_hdf5_file(const std::string& path);  // the HDF5 signature at 0, 512, 1024, ...
// HDF5, or safetensors (an 8-byte little-endian header length below 100 MiB, then '{').
bool is_dump_file(const std::string& path);

// Which tensors to analyse.
struct StepRange {
    std::int64_t lo, hi;  // inclusive
};
// "0-100,200,300-" -> ranges; throws std::invalid_argument with a message naming the bad part.
std::vector<StepRange> parse_steps(std::string_view s);

struct Selection {
    std::vector<std::string> include, exclude;  // fnmatch patterns on the name ('*' matches '/')
    std::vector<StepRange> steps;               // empty: every step (and tensors without one)
    // --role PATTERN=ROLE: the first pattern that matches a tensor's name sets its role (not
    // guessed), before the name filters apply.
    std::vector<std::pair<std::string, Role>> roles;
    bool matches(const TensorInfo& t) const;
};

// Arguments to file names: an existing path is kept; otherwise a pattern with * ? [ is expanded
// (sorted); a missing file or a pattern matching nothing becomes a Problem. A folder is read as
// the layout docs/dumps.md documents (folder_files), or is a Problem naming the globs to use.
// Only regular files are kept: a FIFO, socket or device is a Problem (io/gate.hpp).
std::vector<std::string> expand_inputs(const std::vector<std::string>& args, std::vector<Problem>& problems);
// The dump files of a folder in the documented layout of TransformerEngine's DumpTensors
// (docs/dumps.md): DIR/rank_*/*.pt and DIR/rank_*/iter_*/*.pt for DIR = {log_dir}/tensor_dumps,
// the same under DIR/tensor_dumps/ for DIR = log_dir, and DIR/*.pt, DIR/iter_*/*.pt for one
// rank's folder. Sorted; empty when the folder holds none.
std::vector<std::string> folder_files(const std::string& dir);
// "give the files, or globs ... such as 'DIR/rank_*/*.pt' ...": for a folder that holds none.
std::string folder_hint(const std::string& dir);

// Several files as one dump: lists every file up front (keeping at most one open), applies the
// selection, and reads tensors on demand.
class Dump {
public:
    Dump(const std::vector<std::string>& files, Selection selection = {}, ReadOptions opts = {});
    ~Dump();
    const std::vector<TensorInfo>& tensors() const { return tensors_; }  // selected, file order
    const std::vector<Problem>& errors() const { return errors_; }       // files and selected tensors
    const std::vector<Problem>& notes() const { return notes_; }
    std::size_t files_opened() const { return files_opened_; }
    // Readable tensors the selection left out, and the first few of their names (for "nothing
    // matched" messages that show what does exist).
    std::size_t unselected() const { return unselected_; }
    const std::vector<std::string>& unselected_sample() const { return unselected_sample_; }
    // Streams tensors()[i]. Throws DumpError.
    void read(std::size_t i, const ChunkFn& fn);
    void read_runs(std::size_t i, const ChunkFn& fn);                   // Source::read_runs
    void read_into(std::size_t i, void* dest, const PlacedFn& placed);  // Source::read_into
    std::shared_ptr<const void> map(std::size_t i);                     // Source::map

private:
    ReadOptions opts_;
    std::vector<TensorInfo> tensors_;
    std::vector<Problem> errors_, notes_;
    std::size_t files_opened_ = 0, unselected_ = 0;
    std::vector<std::string> unselected_sample_;
    std::unique_ptr<Source> open_;  // the file read last
};

}  // namespace fp8kit::dump
