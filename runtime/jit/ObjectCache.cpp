// The kernel object cache on disk: file format, checks, atomic writes.
#include "runtime/jit/ObjectCache.h"
#include "runtime/EnvironmentSwitch.h"

#include <fcntl.h>
#include <unistd.h>

#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/SHA256.h>
#include <llvm/Support/xxhash.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "runtime/io/FileBytes.h"

namespace nnc::runtime {

namespace {

// Bump when the file layout below changes (old files then fail the magic check).
constexpr char kMagic[8] = {'n', 'n', 'c', 'o', 'b', 'j', '\0', '\1'};

// One cache file: this header, the key (keyBytes), the object (objectBytes).
// Host byte order: the cache is per machine.
struct FileHeader {
  char magic[8];
  uint32_t keyBytes;
  uint32_t reserved; // 0
  uint64_t objectBytes;
  uint64_t checksum; // xxh3_64 of key followed by object
};
static_assert(sizeof(FileHeader) == 32, "the cache file header is 32 bytes");
static_assert(offsetof(FileHeader, objectBytes) == 16 && offsetof(FileHeader, checksum) == 24,
              "cache file header layout");

std::string getEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

} // namespace

std::string kernelCacheDirFromEnvironment() {
  if (!environmentSwitch("NNC_CACHE").value_or(true)) return "";
  if (std::string dir = getEnv("NNC_CACHE_DIR"); !dir.empty()) return dir;
  // XDG: a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (std::string xdg = getEnv("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') return xdg + "/nnc";
  if (std::string home = getEnv("HOME"); !home.empty()) return home + "/.cache/nnc";
  return "";
}

DiskObjectCache::DiskObjectCache(std::string dir, WarningSink onWarning)
    : dir_(std::move(dir)), onWarning_(std::move(onWarning)) {}

std::string DiskObjectCache::pathFor(const std::string& key) const {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(key));
  std::string name;
  for (size_t i = 0; i < 16; ++i) name += fmt::format("{:02x}", digest[i]);
  return dir_ + "/" + name + ".o";
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::load(const std::string& key) const {
  // A regular file only: a FIFO put in its place blocked the open forever, and a link
  // to /dev/zero was read until memory ran out.
  std::error_code ec;
  const std::string path = pathFor(key);
  if (!std::filesystem::is_regular_file(path, ec)) return nullptr;
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file) return nullptr; // missing (the usual miss) or unreadable
  llvm::StringRef bytes = (*file)->getBuffer();
  FileHeader h;
  if (bytes.size() < sizeof h) return nullptr;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.reserved != 0) return nullptr;
  llvm::StringRef body = bytes.drop_front(sizeof h);
  if (h.keyBytes != key.size() || h.objectBytes == 0 || body.size() != h.keyBytes + h.objectBytes)
    return nullptr; // truncated, extended, or another key's file
  if (body.take_front(h.keyBytes) != key) return nullptr; // a hash-prefix collision
  if (llvm::xxh3_64bits(body) != h.checksum) return nullptr;
  // A copy: the object must be suitably aligned and outlive the mapping of the file.
  auto object = llvm::MemoryBuffer::getMemBufferCopy(body.drop_front(h.keyBytes), key);
  // Whole and ours, but is it an object file? (Only a bug would store one that is not;
  // the linker would then fail late, at materialisation.)
  auto parsed = llvm::object::ObjectFile::createObjectFile(object->getMemBufferRef());
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return nullptr;
  }
  return object;
}

bool DiskObjectCache::store(const std::string& key, llvm::MemoryBufferRef object) {
  if (!writable_) return false;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    disableWrites(ec.message());
    return false;
  }
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.keyBytes = uint32_t(key.size());
  h.objectBytes = object.getBufferSize();
  std::string contents(sizeof h, '\0');
  contents += key;
  contents += object.getBuffer();
  h.checksum = llvm::xxh3_64bits(llvm::StringRef(contents).drop_front(sizeof h));
  std::memcpy(contents.data(), &h, sizeof h);

  if (int writeErrno = writeFileReplacing(pathFor(key), {{contents.data(), contents.size()}})) {
    disableWrites(std::strerror(writeErrno));
    return false;
  }
  ++written_;
  return true;
}

void DiskObjectCache::notifyObjectCompiled(const llvm::Module* m, llvm::MemoryBufferRef object) {
  store(m->getModuleIdentifier(), object);
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::getObject(const llvm::Module* m) {
  return load(m->getModuleIdentifier());
}

void DiskObjectCache::disableWrites(const std::string& why) {
  if (writable_.exchange(false) && onWarning_)
    onWarning_(fmt::format("not caching compiled kernels in '{}': {}", dir_, why));
}

} // namespace nnc::runtime
