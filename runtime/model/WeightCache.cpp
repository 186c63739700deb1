#include "runtime/model/WeightCache.h"
#include "runtime/EnvironmentSwitch.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "compiler/support/Error.h"
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

uint64_t alignUp(uint64_t n) { return (n + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment; }

// pathFor's names: 32 lowercase hex digits and ".weights".
constexpr size_t kDigestDigits = 32;
constexpr std::string_view kEntrySuffix = ".weights";
bool isEntryName(std::string_view name) {
  return name.size() == kDigestDigits + kEntrySuffix.size() && name.substr(kDigestDigits) == kEntrySuffix &&
         std::all_of(name.begin(), name.begin() + kDigestDigits,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
// writeFileReplacing's temporaries of an entry: the entry's name, ".tmp." and 6 characters.
bool isEntryTemporary(std::string_view name) {
  const size_t at = kDigestDigits + kEntrySuffix.size();
  return name.size() == at + 11 && isEntryName(name.substr(0, at)) && name.substr(at, 5) == ".tmp.";
}

} // namespace

std::optional<uint64_t> WeightCache::parseSize(const std::string &text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  const uint64_t count = std::stoull(text.substr(0, digits));
  std::string unit = llvm::StringRef(text).substr(digits).lower();
  for (const char *tail : {"ib", "b"})
    if (unit.size() == 1 + std::strlen(tail) && unit.substr(1) == tail) unit.resize(1);
  int shift = 0;
  if (unit == "k") shift = 10;
  else if (unit == "m") shift = 20;
  else if (unit == "g") shift = 30;
  else if (unit == "t") shift = 40;
  else if (!unit.empty()) return std::nullopt;
  if (count > (UINT64_MAX >> shift)) return std::nullopt;
  return count << shift;
}

uint64_t WeightCache::maxBytesFromEnvironment() {
  const char *max = std::getenv("NNC_WEIGHT_CACHE_MAX");
  if (!max || !*max) return kDefaultMaxBytes;
  const std::optional<uint64_t> bytes = parseSize(max);
  if (!bytes)
    throw UsageError(fmt::format("NNC_WEIGHT_CACHE_MAX={}: expected a size in bytes, such as 16G, 500M or "
                                 "1073741824 (K, M, G, T: binary multiples)",
                                 max));
  return *bytes;
}

std::optional<WeightCache> WeightCache::fromEnvironment(const std::string &kernelCacheDir) {
  if (!environmentSwitch("NNC_WEIGHT_CACHE").value_or(false)) return std::nullopt;
  const uint64_t maxBytes = maxBytesFromEnvironment();
  if (const char *dir = std::getenv("NNC_WEIGHT_CACHE_DIR"); dir && *dir) return WeightCache(dir, maxBytes);
  if (kernelCacheDir.empty()) return std::nullopt;
  return WeightCache(kernelCacheDir + "/weights", maxBytes);
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
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec); // used now (prune)
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
  const std::string path = pathFor(key);
  if (writeFileReplacing(path, pieces) != 0) return false;
  prune(std::filesystem::path(path).filename().string());
  return true;
}

void WeightCache::prune(const std::string &keep) const {
  namespace fs = std::filesystem;
  struct Found {
    fs::file_time_type used;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<Found> entries;
  uint64_t total = 0;
  const fs::file_time_type abandoned = fs::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code sizeError, timeError;
    const uint64_t bytes = it->file_size(sizeError);
    const fs::file_time_type used = it->last_write_time(timeError);
    if (sizeError || timeError) continue; // gone meanwhile, or not a file
    if (isEntryTemporary(name) && used < abandoned) {
      fs::remove(it->path(), timeError);
    } else if (isEntryName(name)) {
      total += bytes;
      if (name != keep) entries.push_back({used, bytes, it->path()});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Found &a, const Found &b) { return a.used < b.used; });
  for (const Found &e : entries) {
    if (total <= maxBytes_) break;
    if (fs::remove(e.path, ec)) total -= e.bytes;
  }
}

} // namespace nnc::runtime
