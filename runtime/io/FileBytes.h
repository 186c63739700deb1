// Whole-file reads and writes for the input, output and weight file formats.
// Any failure (missing file, a directory, a short write) is a UserError that names
// the file, says what it was for (`role`, e.g. "weights file") and gives the OS reason.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nnc {

// A file read from its start in pieces, so a reader can look at a header (and the
// file's size) before it commits memory to the rest. Failures are UserErrors as below.
class ReadableFile {
public:
  ReadableFile(const std::string& path, const char* role);
  ~ReadableFile();
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;

  // The size of a regular file; nullopt for a pipe or a device (read to learn it).
  std::optional<int64_t> size() const { return size_; }
  // Appends up to `n` more bytes to `out`, growing it only as bytes arrive; returns
  // how many came (fewer than `n`: the end of the file).
  size_t readInto(std::vector<uint8_t>& out, size_t n);
  // Reads and discards the rest; returns how many bytes that was, or -1 when more than
  // `limit` follow (an endless stream, /dev/zero, is not read forever to count it).
  int64_t skipRest(int64_t limit = kSkipLimit);
  static constexpr int64_t kSkipLimit = int64_t(1) << 30;

private:
  std::FILE* file_ = nullptr;
  std::string path_;
  const char* role_;
  std::optional<int64_t> size_;
};

// A regular file mapped read-only, for files of GBs that are only read: the bytes come
// from the page cache with no copy and no fresh memory to zero. map() returns null when
// the file is not a regular file or cannot be mapped (then read it instead); it throws
// a UserError when it cannot be opened at all.
// The file must not be truncated while mapped (reading past its new end is SIGBUS).
class MappedFile {
public:
  static std::shared_ptr<const MappedFile> map(const std::string& path, const char* role);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  // Fills the page tables at once, before a pass that reads all of the file: one call
  // instead of a fault per 64 KiB, spread over a few threads for a large file. Not done
  // by map(): a weights file whose packed weights come from the weight cache is hardly read.
  void populate() const;
  // The same for the pages holding bytes [at, at + bytes) of the mapping (those outside it ignored).
  void populate(const void* at, size_t bytes) const;
  size_t size() const { return size_; }
  // Copies `bytes` of the file from where `at` (within the mapping) maps them into `to`
  // with pread, without touching the mapping: a pass that copies the file (packing
  // weights) makes no page-table entries, which cost more than the copy to make and
  // take down (4.4 GB: 0.42-0.45 s on two threads of a Zen 3 guest, against 0.63-0.89 s
  // reading through the mapping, populated or not, and unmapping it). False, nothing
  // promised about `to`, when `at` is outside the mapping or the read fails.
  bool read(const void* at, size_t bytes, void* to) const;
  // Which file and which version of it: "device:inode:size:mtime-ns:ctime-ns" (a file
  // rewritten in place changes its change time, even when `cp -p` restores the size and
  // mtime). "" for a file modified in the last 2 s: a rewrite within the same tick of
  // the file system's clock could keep that timestamp (Git's "racily clean" entries), so
  // such a file is not identified.
  const std::string& identity() const { return identity_; }

private:
  MappedFile(const uint8_t* data, size_t size, int fd, std::string identity)
      : data_(data), size_(size), fd_(fd), identity_(std::move(identity)) {}
  const uint8_t* data_;
  size_t size_;
  int fd_; // kept open for read()
  std::string identity_;
};

std::vector<uint8_t> readFileBytes(const std::string& path, const char* role);

void writeFileBytes(const std::string& path, const char* role, const void* data,
                    size_t size);

// Writes the pieces, one after another, to a private temporary next to `path`, then
// renames it over `path` in one step, so that a reader sees the old file or the whole
// new one (caches shared by processes). Returns 0, or the errno of the failure (then
// no temporary is left behind).
struct FilePiece {
  const void* data;
  size_t size;
};
int writeFileReplacing(const std::string& path, const std::vector<FilePiece>& pieces);

// True when `path` ends with `extension` (e.g. ".npy"), ignoring ASCII case.
bool hasExtension(const std::string& path, const char* extension);

} // namespace nnc
