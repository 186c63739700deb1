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
  // NNC_WEIGHT_CACHE on/1/true/yes turns it on, in $NNC_WEIGHT_CACHE_DIR, else in
  // "weights" under the kernel cache's directory (ObjectCache.h); nullopt when off or
  // when there is no such directory.
  static std::optional<WeightCache> fromEnvironment();
  explicit WeightCache(std::string dir) : dir_(std::move(dir)) {}

  const std::string &dir() const { return dir_; }
  std::string pathFor(const std::string &key) const;

  struct Entry {
    std::shared_ptr<const MappedFile> file; // keeps the blobs mapped
    std::vector<const uint8_t *> blobs;     // 64-byte aligned
  };
  // The entry stored under `key` whose blobs have exactly these sizes; nullopt otherwise.
  std::optional<Entry> load(const std::string &key, const std::vector<int64_t> &bytes) const;
  // Writes the entry; false (and no file) when it cannot.
  bool store(const std::string &key, const std::vector<llvm::ArrayRef<uint8_t>> &blobs) const;

private:
  std::string dir_;
};

} // namespace nnc::runtime
