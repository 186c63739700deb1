// The weight cache (runtime/model/WeightCache.h): an entry gives back exactly the bytes
// stored under its key, and anything else — another key, other sizes, a damaged or
// short file — is a miss; a model started twice from the same weights file maps its
// constants the second time and computes the same bits; new contents of the file, or
// another weight map, never reuse the old entry.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "CompileHelpers.h"
#include "compiler/support/Error.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/model/CompiledModel.h"
#include "runtime/model/WeightCache.h"
#include "ScopedEnv.h"
#include "WeightFiles.h"

namespace nnc::testing {
namespace {
namespace fs = std::filesystem;

using nnc::test::ScopedEnv;

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("nnc_weight_cache_") {}
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    for (const auto &e : fs::directory_iterator(path / "cache")) out.push_back(e.path());
    return out;
  }
};

std::vector<uint8_t> bytesOf(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 31 + seed);
  return v;
}

TEST(WeightCache, GivesBackTheStoredBytesAndMissesOnAnythingElse) {
  TempDir dir;
  runtime::WeightCache cache((dir.path / "cache").string());
  const std::vector<std::vector<uint8_t>> blobs{bytesOf(1, 1), bytesOf(4097, 2), bytesOf(100, 3)};
  const std::vector<int64_t> sizes{1, 4097, 100};
  ASSERT_TRUE(cache.store("key one", {blobs[0], blobs[1], blobs[2]}));
  auto entry = cache.load("key one", sizes);
  ASSERT_TRUE(entry);
  ASSERT_EQ(entry->blobs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(entry->blobs[i]) % 64, 0u) << i;
    EXPECT_EQ(std::vector<uint8_t>(entry->blobs[i], entry->blobs[i] + sizes[i]), blobs[i]) << i;
  }
  EXPECT_FALSE(cache.load("key two", sizes));
  EXPECT_FALSE(cache.load("key one", {1, 4097}));
  EXPECT_FALSE(cache.load("key one", {1, 4096, 100}));

  // A damaged header or a short file is a miss, never a crash or wrong bytes.
  const std::string path = cache.pathFor("key one");
  const auto whole = fs::file_size(path);
  fs::resize_file(path, whole - 1);
  EXPECT_FALSE(cache.load("key one", sizes));
  ASSERT_TRUE(cache.store("key one", {blobs[0], blobs[1], blobs[2]}));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20); // inside the header's counts
    f.put('\x7f');
  }
  EXPECT_FALSE(cache.load("key one", sizes));
  // Stored again, it is whole again; nothing else is left in the directory.
  ASSERT_TRUE(cache.store("key one", {blobs[0], blobs[1], blobs[2]}));
  EXPECT_TRUE(cache.load("key one", sizes));
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST(WeightCache, IsOffUnlessAskedFor) {
  ScopedEnv off("NNC_WEIGHT_CACHE", "off"), at("NNC_WEIGHT_CACHE_DIR", "/somewhere");
  EXPECT_FALSE(runtime::WeightCache::fromEnvironment("/kernels"));
  ScopedEnv on("NNC_WEIGHT_CACHE", "on");
  ASSERT_TRUE(runtime::WeightCache::fromEnvironment("/kernels"));
  EXPECT_EQ(runtime::WeightCache::fromEnvironment("/kernels")->dir(), "/somewhere");
}

// Without NNC_WEIGHT_CACHE_DIR it lives under the engine's kernel cache (the library's
// Options::kernelCacheDir), and there is none when that engine has no disk cache.
TEST(WeightCache, FollowsTheEnginesKernelCache) {
  ScopedEnv on("NNC_WEIGHT_CACHE", "on"), unset("NNC_WEIGHT_CACHE_DIR", std::nullopt);
  ASSERT_TRUE(runtime::WeightCache::fromEnvironment("/my/kernels"));
  EXPECT_EQ(runtime::WeightCache::fromEnvironment("/my/kernels")->dir(), "/my/kernels/weights");
  EXPECT_FALSE(runtime::WeightCache::fromEnvironment(""));
}

TEST(WeightCache, SizesInBytesOrBinaryMultiples) {
  using runtime::WeightCache;
  EXPECT_EQ(WeightCache::parseSize("1073741824"), uint64_t(1) << 30);
  EXPECT_EQ(WeightCache::parseSize("0"), 0u);
  EXPECT_EQ(WeightCache::parseSize("512K"), uint64_t(512) << 10);
  EXPECT_EQ(WeightCache::parseSize("500m"), uint64_t(500) << 20);
  EXPECT_EQ(WeightCache::parseSize("16G"), uint64_t(16) << 30);
  EXPECT_EQ(WeightCache::parseSize("16GiB"), uint64_t(16) << 30);
  EXPECT_EQ(WeightCache::parseSize("2TB"), uint64_t(2) << 40);
  for (const char *bad : {"", "G", "lots", "1.5G", "-1", "8X", "8GG", "8 G", "99999999T", "99999999999999999999"})
    EXPECT_FALSE(WeightCache::parseSize(bad)) << bad;

  ScopedEnv on("NNC_WEIGHT_CACHE", "on"), at("NNC_WEIGHT_CACHE_DIR", "/somewhere");
  EXPECT_EQ(WeightCache::fromEnvironment("/kernels")->maxBytes(), WeightCache::kDefaultMaxBytes);
  ScopedEnv max("NNC_WEIGHT_CACHE_MAX", "8G");
  EXPECT_EQ(WeightCache::fromEnvironment("/kernels")->maxBytes(), uint64_t(8) << 30);
  ScopedEnv bad("NNC_WEIGHT_CACHE_MAX", "lots");
  try {
    WeightCache::fromEnvironment("/kernels");
    ADD_FAILURE() << "a malformed NNC_WEIGHT_CACHE_MAX was accepted";
  } catch (const UsageError &e) {
    EXPECT_NE(std::string(e.what()).find("NNC_WEIGHT_CACHE_MAX=lots: expected a size"), std::string::npos) << e.what();
  }
}

// After a store the directory holds at most maxBytes of entries: the least recently used
// (written or hit) go first, the entry just written stays even when it alone is larger;
// other files and fresh temporaries are left alone, abandoned temporaries removed.
TEST(WeightCache, KeepsTheDirectoryUnderItsSizeLeastRecentlyUsedFirst) {
  TempDir dir;
  const fs::path at = dir.path / "cache";
  const std::vector<uint8_t> blob = bytesOf(10000, 5);
  runtime::WeightCache unbounded(at.string());
  ASSERT_TRUE(unbounded.store("a", {blob}));
  const uint64_t entryBytes = fs::file_size(unbounded.pathFor("a")); // a 4 KiB header page + the blob
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(unbounded.pathFor("a"), now - std::chrono::hours(3));
  ASSERT_TRUE(unbounded.store("b", {blob}));
  fs::last_write_time(unbounded.pathFor("b"), now - std::chrono::hours(2));
  std::ofstream(at / "notes.txt") << "not an entry";
  const std::string abandoned = unbounded.pathFor("x") + ".tmp.AbC123", fresh = unbounded.pathFor("y") + ".tmp.dEf456";
  std::ofstream(abandoned) << "left by a store that was killed";
  fs::last_write_time(abandoned, now - std::chrono::hours(2));
  std::ofstream(fresh) << "a store under way";

  runtime::WeightCache twoEntries(at.string(), 2 * entryBytes + entryBytes / 2);
  ASSERT_TRUE(twoEntries.load("a", {10000})); // a hit: "a" is now the most recently used
  ASSERT_TRUE(twoEntries.store("c", {blob}));
  EXPECT_TRUE(fs::exists(twoEntries.pathFor("a")));
  EXPECT_FALSE(fs::exists(twoEntries.pathFor("b")));
  EXPECT_TRUE(fs::exists(twoEntries.pathFor("c")));
  EXPECT_TRUE(fs::exists(at / "notes.txt"));
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(fresh));

  runtime::WeightCache tiny(at.string(), 1000);
  ASSERT_TRUE(tiny.store("d", {blob}));
  EXPECT_FALSE(fs::exists(tiny.pathFor("a")));
  EXPECT_FALSE(fs::exists(tiny.pathFor("c")));
  ASSERT_TRUE(tiny.load("d", {10000}));
  EXPECT_EQ(dir.entries().size(), 3u); // "d", notes.txt and the fresh temporary
}

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

// Packed GEMM weights in f32 and in i8 (with their scales), a bias, and a layernorm's
// plain f32 parameters.
constexpr const char *kSource = "model m { input x: [4, 24]\n"
                                "  a = dense(40) relu\n"
                                "  b = dense(33, dtype=i8)\n"
                                "  n = layernorm }";

struct Started {
  std::vector<float> y;
  bool mapped = false;
};

Started start(const test::Compiled &c, const std::string &weights, const runtime::WeightMap &map = {}) {
  runtime::CompiledModel model(c.program(), jit(), 2);
  model.setWeights(runtime::WeightStore::fromSafeTensors(model.program().tensors, weights, "m", map));
  std::vector<float> x(size_t(model.inputType().elements()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 11) * 0.1f - 0.5f;
  Started s{std::vector<float>(size_t(model.outputType().elements())), model.weightsFromCache()};
  model.run(x.data(), s.y.data());
  return s;
}

TEST(WeightCache, SecondStartMapsTheConstantsAndComputesTheSameBits) {
  TempDir dir;
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  const std::string file = (dir.path / "w.safetensors").string();
  writeSafeTensors(file, test::randomWeightsFor(c.program(), 1));
  // A file modified in the last 2 s is not identified (FileBytes.h): none is cached.
  {
    ScopedEnv on("NNC_WEIGHT_CACHE", "on"), at("NNC_WEIGHT_CACHE_DIR", (dir.path / "cache").string());
    EXPECT_FALSE(start(c, file).mapped);
    EXPECT_FALSE(fs::exists(dir.path / "cache"));
  }
  const auto written = fs::last_write_time(file);
  fs::last_write_time(file, written - std::chrono::hours(1));
  const Started uncached = start(c, file);
  EXPECT_FALSE(uncached.mapped);

  ScopedEnv on("NNC_WEIGHT_CACHE", "on"), at("NNC_WEIGHT_CACHE_DIR", (dir.path / "cache").string());
  const Started first = start(c, file);
  EXPECT_FALSE(first.mapped);
  ASSERT_EQ(dir.entries().size(), 1u);
  const Started second = start(c, file);
  EXPECT_TRUE(second.mapped);
  EXPECT_EQ(second.y, uncached.y);
  EXPECT_EQ(first.y, uncached.y);

  // New values in the file (same size): a new entry, the new values' results.
  writeSafeTensors(file, test::randomWeightsFor(c.program(), 2));
  fs::last_write_time(file, written - std::chrono::minutes(59));
  ScopedEnv noCache("NNC_WEIGHT_CACHE", "off");
  const Started fresh = start(c, file);
  ScopedEnv onAgain("NNC_WEIGHT_CACHE", "on");
  const Started rewritten = start(c, file);
  EXPECT_FALSE(rewritten.mapped);
  EXPECT_NE(rewritten.y, uncached.y);
  EXPECT_EQ(rewritten.y, fresh.y);
  EXPECT_TRUE(start(c, file).mapped);
  EXPECT_EQ(dir.entries().size(), 2u);

  // Rewritten with its size and modification time put back exactly (`cp -p` of another
  // checkpoint, `tar x`): the change time tells it apart, so the old entry is not used.
  writeSafeTensors(file, test::randomWeightsFor(c.program(), 3));
  fs::last_write_time(file, written - std::chrono::minutes(59));
  const Started restored = start(c, file);
  EXPECT_FALSE(restored.mapped);
  EXPECT_NE(restored.y, rewritten.y);
  EXPECT_EQ(dir.entries().size(), 3u);

  // The same file through a weight map that renames nothing the model reads is still
  // other weights as far as the key goes: a miss, then a hit.
  const auto map = runtime::WeightMap::parse("unused.* -> other.*\n", "map");
  EXPECT_FALSE(start(c, file, map).mapped);
  EXPECT_TRUE(start(c, file, map).mapped);
}

TEST(WeightCache, RandomWeightsAreNeverCached) {
  TempDir dir;
  ScopedEnv on("NNC_WEIGHT_CACHE", "on"), at("NNC_WEIGHT_CACHE_DIR", (dir.path / "cache").string());
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  runtime::CompiledModel model(c.program(), jit(), 1);
  model.setWeights(runtime::WeightStore::random(model.program().tensors, 7));
  EXPECT_FALSE(model.weightsFromCache());
  EXPECT_FALSE(fs::exists(dir.path / "cache"));
}

} // namespace
} // namespace nnc::testing
