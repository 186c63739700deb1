// A disk cache of a model's constants as its kernels read them (GEMM weights packed in
// their panels and storage dtype, tables stored below f32, folded weights), so that a
// later start from the same weights file maps them instead of making them again:
// packing TinyLlama's 4.4 GB of f32 weights takes ~1 s on 2 cores (longer when the
// memory is fresh), mapping the cached entry tens of ms (docs/cli.md, "Weight cache").
// Opt-in (NNC_WEIGHT_CACHE=on): an entry is as big as the model's constants.
//
// An entry is one file per key: the weights' identity (WeightStore::identity: the
// file's device, inode, size and modification time, and the weight map), nnc's code
// fingerprint (the packing code is in it), the quantisation options and every
// constant's recipe and packed layout. The file is <dir>/<SHA-256 prefix of the key>
// .weights and holds the key text itself, so a collision or a stale entry is a miss,
// never wrong data; then each constant's bytes at a 4 KiB-aligned offset. Entries are
// written under a temporary name and renamed, so a reader never sees half of one.
// Failures to read or write are misses: the constants are made as without the cache.
//
// The directory is kept under a size (NNC_WEIGHT_CACHE_MAX, default 16 GiB): after a
// store, the least recently used entries (a hit counts as a use: it sets the entry's
// modification time) are removed until the entries fit; the one just written always
// stays. A process that has an entry mapped keeps reading it after its removal.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

namespace nnc {
class MappedFile;
}

namespace nnc::runtime {

class WeightCache {
public:
  static constexpr uint64_t kDefaultMaxBytes = uint64_t(16) << 30;

  // NNC_WEIGHT_CACHE on/1/true/yes turns it on, in $NNC_WEIGHT_CACHE_DIR, else in
  // "weights" under `kernelCacheDir` (the engine's kernel cache, JitEngine::cacheDir:
  // the environment's, or the library's Options::kernelCacheDir), kept under
  // $NNC_WEIGHT_CACHE_MAX bytes (parseSize; a malformed value is a UsageError); nullopt
  // when off or when there is no such directory.
  static std::optional<WeightCache> fromEnvironment(const std::string &kernelCacheDir);
  // $NNC_WEIGHT_CACHE_MAX in bytes, kDefaultMaxBytes when unset; a UsageError when malformed.
  static uint64_t maxBytesFromEnvironment();
  explicit WeightCache(std::string dir, uint64_t maxBytes = kDefaultMaxBytes)
      : dir_(std::move(dir)), maxBytes_(maxBytes) {}
  // "1073741824", "512K", "500M", "8G", "1T" (binary multiples, any case, an optional
  // "iB"/"B" after the letter): bytes; nullopt when it is not such a size.
  static std::optional<uint64_t> parseSize(const std::string &text);

  const std::string &dir() const { return dir_; }
  uint64_t maxBytes() const { return maxBytes_; }
  std::string pathFor(const std::string &key) const;

  struct Entry {
    std::shared_ptr<const MappedFile> file; // keeps the blobs mapped
    std::vector<const uint8_t *> blobs;     // 64-byte aligned
  };
  // The entry stored under `key` whose blobs have exactly these sizes; nullopt otherwise.
  std::optional<Entry> load(const std::string &key, const std::vector<int64_t> &bytes) const;
  // Writes the entry, then prunes the directory; false (and no file) when it cannot.
  bool store(const std::string &key, const std::vector<llvm::ArrayRef<uint8_t>> &blobs) const;

private:
  // Removes the least recently used entries but `keep` (a file name) until the entries
  // take at most maxBytes_, and temporaries an interrupted store left over an hour ago.
  void prune(const std::string &keep) const;

  std::string dir_;
  uint64_t maxBytes_;
};

} // namespace nnc::runtime
