// The on-disk kernel object cache: a second engine links instead of compiling and
// computes the same bits; bad files are recompiled; NNC_CACHE=off and an unwritable
// directory write nothing and fail nothing. Every test uses its own temporary cache
// directory (never the user's ~/.cache).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "runtime/jit/Gemm.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/jit/ObjectCache.h"
#include "ScopedEnv.h"

namespace nnc::testing {
namespace {

namespace fs = std::filesystem;
using codegen::Activation;
using codegen::ElementwiseSpec;
using codegen::GemmSpec;
using runtime::JitEngine;
using runtime::KernelCacheOptions;

class TempDir {
public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "nnc_jit_cache_XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

using nnc::test::ScopedEnv;

// The kernel objects in a cache directory (not the host's measured choices, ".row" and
// ".prefetch" files the engine stores there too: JitEngine.h, hostRowChoice and
// WeightPrefetchChoice).
std::vector<fs::path> filesIn(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() != ".row" && e.path().extension() != ".prefetch") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The kernels these tests cache: two GEMMs (one with an M and an N tail) and a softmax.
const GemmSpec kGemmA{5, 37, 19, true, Activation::Relu};
const GemmSpec kGemmB{1, 10, 128, false, Activation::None};
const ElementwiseSpec kSoftmax{ElementwiseSpec::Softmax, Activation::None, 3, 21};
constexpr size_t kKernels = 3;

// Runs all three kernels of `jit` on fixed inputs; the outputs, concatenated.
std::vector<float> runAll(JitEngine& jit) {
  std::vector<float> out;
  for (const GemmSpec& spec : {kGemmA, kGemmB}) {
    runtime::Gemm gemm(jit, spec);
    auto A = randomFloats(size_t(spec.M * spec.K), 1);
    auto W = randomFloats(size_t(spec.N * spec.K), 2);
    auto bias = randomFloats(size_t(spec.N), 3);
    std::vector<float> C(size_t(spec.M * spec.N));
    gemm.run(A.data(), gemm.pack(W.data()), bias.data(), nullptr, C.data());
    out.insert(out.end(), C.begin(), C.end());
  }
  runtime::Elementwise softmax(jit, kSoftmax);
  auto x = randomFloats(size_t(kSoftmax.rows * kSoftmax.cols), 4);
  std::vector<float> y(x.size());
  softmax.run(x.data(), nullptr, y.data());
  out.insert(out.end(), y.begin(), y.end());
  return out;
}

// What the kernels must compute (no cache involved).
std::vector<float> expected() {
  auto jit = JitEngine::create(KernelCacheOptions{});
  return runAll(*jit);
}

TEST(JitCache, SecondEngineLinksEveryKernelAndComputesTheSameBits) {
  TempDir dir;
  auto first = JitEngine::create(KernelCacheOptions{dir.path()});
  EXPECT_EQ(first->cacheDir(), dir.path());
  std::vector<float> want = runAll(*first);
  EXPECT_EQ(first->compileStats().compiled, kKernels);
  EXPECT_EQ(first->kernelsFromCache(), 0u);
  EXPECT_EQ(filesIn(dir.path()).size(), kKernels); // one file per kernel, no temporaries
  EXPECT_EQ(want, expected());

  auto second = JitEngine::create(KernelCacheOptions{dir.path()});
  std::vector<float> got = runAll(*second);
  runtime::CompileStats stats = second->compileStats();
  EXPECT_EQ(stats.compiled, 0u) << "a warm start must not run LLVM";
  EXPECT_EQ(stats.fromCache, kKernels);
  EXPECT_EQ(second->kernelsFromCache(), kKernels);
  EXPECT_EQ(second->kernelsCompiled(), kKernels); // ready, whichever way
  EXPECT_EQ(stats.emitMillis, 0.0);
  EXPECT_EQ(stats.optimiseMillis, 0.0);
  EXPECT_EQ(stats.codegenMillis, 0.0);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

// The frames a kernel takes are read from its object whichever way it came: a cached
// kernel says the same as a compiled one. An f16 GEMM at 96 rows widens its weight
// panels (256 KiB here) into its scratch, not onto the stack: its frames are its saved
// registers and spills.
TEST(JitCache, ACachedKernelSaysTheStackItTakes) {
  TempDir dir;
  GemmSpec widened{96, 256, 2048};
  widened.weightType = DType::F16;
  auto first = JitEngine::create(KernelCacheOptions{dir.path()});
  const size_t compiled = first->stackBytes(widened);
  EXPECT_GT(compiled, 0u);
  EXPECT_LT(compiled, size_t(16) << 10);
  auto second = JitEngine::create(KernelCacheOptions{dir.path()});
  EXPECT_EQ(second->stackBytes(widened), compiled);
  EXPECT_EQ(second->compileStats().fromCache, 1u);
}

TEST(JitCache, AnotherCpuDoesNotReuseTheHostsObjects) {
  TempDir dir;
  runAll(*JitEngine::create(KernelCacheOptions{dir.path()}));
  auto baseline = JitEngine::create(runtime::JitTarget{"x86-64", ""}, KernelCacheOptions{dir.path()});
  if (baseline->cpuName() == JitEngine::create(KernelCacheOptions{})->cpuName())
    GTEST_SKIP() << "the host is the x86-64 baseline";
  runtime::Gemm gemm(*baseline, kGemmA);
  EXPECT_EQ(baseline->kernelsFromCache(), 0u);
  EXPECT_EQ(baseline->compileStats().compiled, 1u);
}

// Damages every cache file in one of several ways; each must be detected.
TEST(JitCache, DamagedFilesAreRecompiledAndRewritten) {
  using Damage = void (*)(const fs::path&, const std::vector<fs::path>&);
  const std::vector<std::pair<const char*, Damage>> damages = {
      {"truncated", [](const fs::path& f, const auto&) { fs::resize_file(f, fs::file_size(f) / 2); }},
      {"empty", [](const fs::path& f, const auto&) { fs::resize_file(f, 0); }},
      {"one byte longer", [](const fs::path& f, const auto&) { std::ofstream(f, std::ios::app) << 'x'; }},
      {"a flipped bit in the object",
       [](const fs::path& f, const auto&) {
         std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
         io.seekg(-100, std::ios::end);
         char c = 0;
         io.get(c);
         io.seekp(-100, std::ios::end);
         io.put(char(c ^ 0x10));
       }},
      {"a flipped bit in the header",
       [](const fs::path& f, const auto&) {
         std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
         io.seekp(17);
         io.put('\x7f');
       }},
      {"another kernel's file",
       [](const fs::path& f, const std::vector<fs::path>& all) {
         // Each file gets the next one's contents (the last one the first's, saved).
         size_t i = size_t(std::find(all.begin(), all.end(), f) - all.begin());
         fs::path saved = all[0].string() + ".saved";
         if (i == 0) fs::copy_file(all[0], saved);
         fs::copy_file(i + 1 < all.size() ? all[i + 1] : saved, f, fs::copy_options::overwrite_existing);
         if (i + 1 == all.size()) fs::remove(saved);
       }},
      // Not regular files: the open of a FIFO blocked forever, /dev/zero was read until
      // memory ran out.
      {"a FIFO in its place",
       [](const fs::path& f, const auto&) {
         fs::remove(f);
         ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0);
       }},
      {"a link to /dev/zero",
       [](const fs::path& f, const auto&) {
         fs::remove(f);
         fs::create_symlink("/dev/zero", f);
       }},
      {"a well-formed file whose object is not an object file",
       [](const fs::path& f, const auto&) {
         // Passes every check of the file format (stored by the cache itself, under the
         // kernel's own key), so it is the linker that must reject it.
         std::ifstream in(f, std::ios::binary);
         std::string bytes((std::istreambuf_iterator<char>(in)), {});
         uint32_t keyBytes = 0;
         std::memcpy(&keyBytes, bytes.data() + 8, 4);
         std::string key = bytes.substr(32, keyBytes);
         std::string junk(200, 'j');
         ASSERT_TRUE(runtime::DiskObjectCache(f.parent_path().string())
                         .store(key, llvm::MemoryBufferRef(junk, "junk")));
         ASSERT_EQ(fs::file_size(f), 32 + keyBytes + junk.size());
       }},
  };
  const std::vector<float> want = expected();
  for (const auto& [what, damage] : damages) {
    SCOPED_TRACE(what);
    TempDir dir;
    runAll(*JitEngine::create(KernelCacheOptions{dir.path()}));
    auto files = filesIn(dir.path());
    ASSERT_EQ(files.size(), kKernels);
    for (const auto& f : files) damage(f, files);

    auto repaired = JitEngine::create(KernelCacheOptions{dir.path()});
    EXPECT_EQ(runAll(*repaired), want);
    EXPECT_EQ(repaired->kernelsFromCache(), 0u);
    EXPECT_EQ(repaired->compileStats().compiled, kKernels);

    // The recompiled objects replaced the damaged files.
    auto again = JitEngine::create(KernelCacheOptions{dir.path()});
    EXPECT_EQ(runAll(*again), want);
    EXPECT_EQ(again->kernelsFromCache(), kKernels);
    EXPECT_EQ(filesIn(dir.path()).size(), kKernels);
  }
}

TEST(JitCache, LoadReturnsTheObjectOnlyForItsOwnKey) {
  TempDir dir;
  runtime::Gemm(*JitEngine::create(KernelCacheOptions{dir.path()}), kGemmB);
  auto files = filesIn(dir.path());
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint32_t keyBytes = 0;
  std::memcpy(&keyBytes, bytes.data() + 8, 4);
  std::string key = bytes.substr(32, keyBytes);
  EXPECT_NE(key.find(kGemmB.key()), std::string::npos) << key;

  runtime::DiskObjectCache cache(dir.path());
  EXPECT_EQ(cache.pathFor(key), files[0].string());
  auto loaded = cache.load(key);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->getBuffer(), llvm::StringRef(bytes).drop_front(32 + keyBytes));
  EXPECT_FALSE(cache.load(key + "x"));
  // The same file under another key's name: the stored key does not match.
  fs::copy_file(files[0], cache.pathFor(key + "x"));
  EXPECT_FALSE(cache.load(key + "x"));
}

TEST(JitCache, OffByEnvironmentWritesNothing) {
  TempDir dir;
  ScopedEnv cacheDir("NNC_CACHE_DIR", dir.path());
  for (const char* off : {"off", "OFF", "0", "false", "no"}) {
    ScopedEnv cache("NNC_CACHE", off);
    EXPECT_EQ(runtime::kernelCacheDirFromEnvironment(), "") << off;
    auto jit = JitEngine::create();
    EXPECT_EQ(jit->cacheDir(), "");
    EXPECT_EQ(runAll(*jit), expected());
    EXPECT_EQ(jit->compileStats().compiled, kKernels);
  }
  EXPECT_TRUE(filesIn(dir.path()).empty());
  ScopedEnv cache("NNC_CACHE", std::nullopt);
  auto jit = JitEngine::create();
  EXPECT_EQ(jit->cacheDir(), dir.path());
}

TEST(JitCache, DirectoryFromTheEnvironment) {
  ScopedEnv cache("NNC_CACHE", std::nullopt);
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("NNC_CACHE_DIR", "/somewhere/kernels");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(runtime::kernelCacheDirFromEnvironment(), "/somewhere/kernels");
  }
  ScopedEnv dir("NNC_CACHE_DIR", std::nullopt);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(runtime::kernelCacheDirFromEnvironment(), "/xdg/nnc");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/is/ignored");
    EXPECT_EQ(runtime::kernelCacheDirFromEnvironment(), "/home/someone/.cache/nnc");
  }
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(runtime::kernelCacheDirFromEnvironment(), "/home/someone/.cache/nnc");
  ScopedEnv noHome("HOME", std::nullopt);
  EXPECT_EQ(runtime::kernelCacheDirFromEnvironment(), "");
}

TEST(JitCache, UnwritableDirectoryCompilesAndWarnsOncePerEngineThroughItsSink) {
  TempDir dir;
  // Below a regular file: no directory can be made there, even by root.
  std::string blocker = dir.path() + "/a_file";
  std::ofstream(blocker) << "not a directory";
  std::string cacheDir = blocker + "/nnc";
  std::vector<std::string> told;
  KernelCacheOptions options{cacheDir, [&told](const std::string &m) { told.push_back(m); }};
  ::testing::internal::CaptureStderr();
  std::vector<float> first, second;
  {
    auto jit = JitEngine::create(options);
    first = runAll(*jit);
    EXPECT_EQ(jit->compileStats().compiled, kKernels);
  }
  ASSERT_EQ(told.size(), 1u);
  EXPECT_NE(told[0].find(cacheDir), std::string::npos) << told[0];
  {
    auto jit = JitEngine::create(options);
    second = runAll(*jit);
    EXPECT_EQ(jit->kernelsFromCache(), 0u);
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(first, expected());
  EXPECT_EQ(second, first);
  EXPECT_EQ(told.size(), 2u); // once per engine
  EXPECT_EQ(err, "");        // the library never prints
  EXPECT_EQ(filesIn(dir.path()).size(), 1u); // just the blocker
}

TEST(JitCache, EnginesCompilingTheSameKernelsAtOnceLeaveWholeFiles) {
  TempDir dir;
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> results(4);
  for (size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      auto jit = JitEngine::create(KernelCacheOptions{dir.path()});
      results[t] = runAll(*jit);
    });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, results[0]);
  EXPECT_EQ(filesIn(dir.path()).size(), kKernels); // no temporaries left behind
  auto reader = JitEngine::create(KernelCacheOptions{dir.path()});
  EXPECT_EQ(runAll(*reader), results[0]);
  EXPECT_EQ(reader->kernelsFromCache(), kKernels);
}

// prepare() compiles a model's kernels side by side; afterwards kernel()
// only look up, and the kernels compute what one-at-a-time compiles compute.
TEST(JitPrepare, CompilesEachKernelOnceSideBySideWithTheSameResults) {
  auto jit = JitEngine::create(KernelCacheOptions{});
  jit->prepare({kGemmA, kGemmB, kGemmA, kSoftmax, kSoftmax});
  EXPECT_EQ(jit->compileStats().compiled, kKernels);
  EXPECT_EQ(runAll(*jit), expected());
  EXPECT_EQ(jit->compileStats().compiled, kKernels); // runAll compiled nothing more
  jit->prepare({kGemmB});
  EXPECT_EQ(jit->kernelsCompiled(), kKernels);
}

TEST(JitPrepare, MixesCachedAndNewKernels) {
  TempDir dir;
  {
    auto jit = JitEngine::create(KernelCacheOptions{dir.path()});
    jit->kernel(kGemmA);
  }
  auto jit = JitEngine::create(KernelCacheOptions{dir.path()});
  jit->prepare({kGemmA, kGemmB, kSoftmax});
  EXPECT_EQ(jit->kernelsFromCache(), 1u);
  EXPECT_EQ(jit->compileStats().compiled, 2u);
  EXPECT_EQ(runAll(*jit), expected());
  EXPECT_EQ(filesIn(dir.path()).size(), kKernels);
}

TEST(JitPrepare, ABadSpecThrowsBeforeAnythingCompiles) {
  auto jit = JitEngine::create(KernelCacheOptions{});
  EXPECT_THROW(jit->prepare({kGemmA, GemmSpec{0, 3, 4}}), std::invalid_argument);
  EXPECT_EQ(jit->kernelsCompiled(), 0u);
}

} // namespace
} // namespace nnc::testing
