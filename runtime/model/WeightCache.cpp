#include "runtime/model/WeightCache.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <strings.h>

#include "runtime/io/FileBytes.h"
#include "runtime/jit/ObjectCache.h"

namespace nnc::runtime {

namespace {

// File layout: Header, the key's bytes, `count` (offset, bytes) pairs, then the blobs
// at kBlobAlignment-aligned offsets.
constexpr char kMagic[8] = {'N', 'N', 'C', 'W', 'G', 'T', '0', '1'};
constexpr uint64_t kBlobAlignment = 4096;
struct Header {
  char magic[8];
  uint64_t keyBytes;
  uint64_t count;
};
struct BlobPlace {
  uint64_t offset, bytes;
};

bool isOn(const char *v) {
  if (!v) return false;
  for (const char *on : {"on", "1", "true", "yes"})
    if (strcasecmp(v, on) == 0) return true;
  return false;
}

uint64_t alignUp(uint64_t n) { return (n + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment; }

} // namespace

std::optional<WeightCache> WeightCache::fromEnvironment() {
  if (!isOn(std::getenv("NNC_WEIGHT_CACHE"))) return std::nullopt;
  if (const char *dir = std::getenv("NNC_WEIGHT_CACHE_DIR"); dir && *dir) return WeightCache(dir);
  const std::string kernels = kernelCacheDirFromEnvironment();
  if (kernels.empty()) return std::nullopt;
  return WeightCache(kernels + "/weights");
}

std::string WeightCache::pathFor(const std::string &key) const {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(key));
  return dir_ + "/" + llvm::toHex(llvm::ArrayRef<uint8_t>(digest).take_front(16), /*LowerCase=*/true) + ".weights";
}

std::optional<WeightCache::Entry> WeightCache::load(const std::string &key, const std::vector<int64_t> &bytes) const {
  const std::string path = pathFor(key);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt; // the usual miss
  std::shared_ptr<const MappedFile> file;
  try {
    file = MappedFile::map(path, "weight cache entry");
  } catch (const std::exception &) { // unreadable: a miss
    return std::nullopt;
  }
  if (!file) return std::nullopt;
  const uint8_t *data = file->data();
  const uint64_t size = file->size();
  Header h;
  if (size < sizeof h) return std::nullopt;
  std::memcpy(&h, data, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.keyBytes != key.size() || h.count != bytes.size())
    return std::nullopt;
  const uint64_t tableAt = sizeof h + h.keyBytes;
  if (size < tableAt + h.count * sizeof(BlobPlace) || std::memcmp(data + sizeof h, key.data(), key.size()) != 0)
    return std::nullopt;
  Entry entry;
  for (uint64_t i = 0; i < h.count; ++i) {
    BlobPlace place;
    std::memcpy(&place, data + tableAt + i * sizeof place, sizeof place);
    if (place.bytes != uint64_t(bytes[i]) || place.offset % 64 != 0 || place.offset > size ||
        place.bytes > size - place.offset)
      return std::nullopt;
    entry.blobs.push_back(data + place.offset);
  }
  file->populate(); // the kernels read all of it
  entry.file = std::move(file);
  return entry;
}

bool WeightCache::store(const std::string &key, const std::vector<llvm::ArrayRef<uint8_t>> &blobs) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return false;
  const Header h{{kMagic[0], kMagic[1], kMagic[2], kMagic[3], kMagic[4], kMagic[5], kMagic[6], kMagic[7]},
                 key.size(), blobs.size()};
  std::vector<BlobPlace> places;
  uint64_t at = alignUp(sizeof h + key.size() + blobs.size() * sizeof(BlobPlace));
  for (const auto &b : blobs) {
    places.push_back({at, b.size()});
    at = alignUp(at + b.size());
  }
  static const std::vector<uint8_t> zeros(kBlobAlignment, 0);
  std::vector<FilePiece> pieces{{&h, sizeof h}, {key.data(), key.size()}, {places.data(), places.size() * sizeof(BlobPlace)}};
  uint64_t written = sizeof h + key.size() + places.size() * sizeof(BlobPlace);
  for (size_t i = 0; i < blobs.size(); ++i) {
    pieces.push_back({zeros.data(), size_t(places[i].offset - written)});
    pieces.push_back({blobs[i].data(), blobs[i].size()});
    written = places[i].offset + blobs[i].size();
  }
  return writeFileReplacing(pathFor(key), pieces) == 0;
}

} // namespace nnc::runtime
