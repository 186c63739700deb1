// The on-disk cache of compiled kernels: one object file per kernel, so a second
// process running the same model links the objects instead of running LLVM.
//
// Layout: DIR/<32 hex digits>.o, the digits a SHA-256 prefix of the full cache key
// (JitEngine builds the key: spec key, CPU, features and the code fingerprint). Each
// file is a FileHeader, the full key, then the object bytes; the header's checksum
// covers key and object. load() returns nothing for a missing, truncated, corrupt or
// colliding file, or one whose object does not parse as an object file (the caller
// recompiles and overwrites it).
//
// Writes are atomic: a temporary file in DIR, then rename(2), so a reader sees either
// nothing or a whole file, also with several processes writing the same key. A
// directory that cannot be created or written never fails a compile: the cache tells
// its warning sink once and stops writing.
//
// It is also an llvm::ObjectCache, keyed by the module identifier (JitEngine names
// each kernel module by its full key), for the compile function of the LLJIT.
#pragma once
#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/Support/MemoryBuffer.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace nnc::runtime {

// Where kernels are cached, from the environment: none when NNC_CACHE is off/0/false/no;
// else $NNC_CACHE_DIR, else $XDG_CACHE_HOME/nnc, else $HOME/.cache/nnc; none without
// any of them. "" means no disk cache.
std::string kernelCacheDirFromEnvironment();

class DiskObjectCache : public llvm::ObjectCache {
public:
  using WarningSink = std::function<void(const std::string &message)>;
  explicit DiskObjectCache(std::string dir, WarningSink onWarning = {});

  const std::string& dir() const { return dir_; }
  // The file that holds `key` (whether or not it exists).
  std::string pathFor(const std::string& key) const;

  // The object stored under `key`, or null when there is none or it fails the checks.
  std::unique_ptr<llvm::MemoryBuffer> load(const std::string& key) const;
  // Stores `object` under `key`; false (after the one warning) when it cannot.
  bool store(const std::string& key, llvm::MemoryBufferRef object);

  void notifyObjectCompiled(const llvm::Module* m, llvm::MemoryBufferRef object) override;
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* m) override;

  size_t objectsWritten() const { return written_; }

private:
  void disableWrites(const std::string& why);
  std::string dir_;
  WarningSink onWarning_;
  std::atomic<bool> writable_{true};
  std::atomic<size_t> written_{0};
};

} // namespace nnc::runtime
