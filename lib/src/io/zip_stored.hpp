// A strict reader of the zip archives torch.save writes (not installed): every entry STORED
// (torch's PyTorchFileWriter never compresses), all under one top-level folder.
//
// Steps (PKWARE APPNOTE.TXT 6.3.x, sections 4.3.6 - 4.3.16 and 4.4):
//  1. find the end-of-central-directory record in the last 64 KiB + 22 bytes;
//  2. read every central-directory header: name, sizes, method, local-header offset;
//  3. read each local header, check its name equals the central one, and place the data after it;
//  4. refuse what a reader could be fooled by: compressed or encrypted entries, names with '..',
//     '\', a leading '/', or outside the archive's folder, duplicate names, data past the end of
//     the file or overlapping another entry's header or data, and ZIP64 (archives over 4 GiB).
// Every refusal is a ZipError naming the file and, where there is one, the entry.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8kit::dump::detail {

struct ZipError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ZipEntry {
    std::uint64_t offset = 0;  // of the entry's data in the file
    std::uint64_t size = 0;
};

class ZipStored {
public:
    explicit ZipStored(const std::string& path);  // throws ZipError
    ~ZipStored();
    ZipStored(const ZipStored&) = delete;
    ZipStored& operator=(const ZipStored&) = delete;
    const std::string& path() const { return path_; }
    const std::string& folder() const { return folder_; }  // the archive's top-level folder
    // The entry `folder()/rel`, or nullptr.
    const ZipEntry* find(const std::string& rel) const;
    // Reads `n` bytes at `at` of entry `e` (at + n <= e.size). Throws ZipError.
    void read(const ZipEntry& e, std::uint64_t at, void* out, std::size_t n) const;
    std::vector<std::uint8_t> read_all(const ZipEntry& e, std::size_t limit) const;

private:
    std::string path_, folder_;
    int fd_ = -1;  // open for the archive's lifetime: reads see the file that was checked
    std::uint64_t file_size_ = 0;
    std::map<std::string, ZipEntry> entries_;  // by name relative to folder_
};

// True when the file starts with a zip local-file header ("PK\3\4").
bool is_zip_file(const std::string& path);

}  // namespace fp8kit::dump::detail
