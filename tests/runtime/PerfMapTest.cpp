// NNC_PERF_MAP (runtime/jit/PerfMap.h): with "on", every kernel an engine links,
// compiled or read from the kernel cache, has a line "START SIZE NAME" in
// /tmp/perf-<pid>.map whose range holds the kernel's entry and whose name is the
// kernel's; with it off, an engine's kernels are not in the map; other values are
// usage errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ScopedEnv.h"
#include "compiler/support/Error.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/jit/PerfMap.h"

namespace nnc::testing {
namespace {

namespace fs = std::filesystem;
using nnc::test::ScopedEnv;
using runtime::JitEngine;
using runtime::KernelCacheOptions;

struct MapLine {
  uint64_t start = 0, size = 0;
  std::string name;
};

std::vector<MapLine> readMap() {
  std::vector<MapLine> lines;
  std::ifstream in(runtime::perfMapPath());
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream fields(text);
    MapLine line;
    fields >> std::hex >> line.start >> line.size >> line.name;
    lines.push_back(line);
  }
  return lines;
}

// The map's line named `name` whose range holds `entry`, or nullptr. (Lines outlive the
// code: a destroyed engine's memory may hold a later engine's kernels, so the address
// alone does not identify a line.)
const MapLine* lineOf(const std::vector<MapLine>& lines, const std::string& name, const void* entry) {
  const auto at = reinterpret_cast<uint64_t>(entry);
  for (const MapLine& line : lines)
    if (line.name.rfind(name, 0) == 0 && at >= line.start && at < line.start + line.size) return &line;
  return nullptr;
}

bool named(const std::vector<MapLine>& lines, const std::string& name) {
  for (const MapLine& line : lines)
    if (line.name.rfind(name, 0) == 0) return true;
  return false;
}

// A GEMM no other test in this file compiles, so its address is this engine's own.
codegen::GemmSpec gemm(int64_t m) { return codegen::GemmSpec{m, 29, 13, true, codegen::Activation::Relu}; }

// Each test leaves no map behind (the writer opens the file for each line).
class PerfMap : public ::testing::Test {
protected:
  void TearDown() override { std::remove(runtime::perfMapPath().c_str()); }
};

TEST_F(PerfMap, OnNamesCompiledAndCachedKernelsWhereTheyLie) {
  const ScopedEnv on("NNC_PERF_MAP", "on");
  const fs::path cache = fs::temp_directory_path() / ("nnc_perf_map_" + std::to_string(getpid()));
  fs::remove_all(cache);
  auto compiler = JitEngine::create(KernelCacheOptions{cache.string()});
  void* compiled = compiler->kernel(gemm(3));
  auto linker = JitEngine::create(KernelCacheOptions{cache.string()}); // links the cached object
  void* cached = linker->kernel(gemm(3));
  fs::remove_all(cache);
  ASSERT_NE(compiled, cached);

  const std::vector<MapLine> lines = readMap();
  const MapLine* first = lineOf(lines, "nnc_gemm_m3_n29_k13_", compiled);
  const MapLine* second = lineOf(lines, "nnc_gemm_m3_n29_k13_", cached);
  ASSERT_NE(first, nullptr) << runtime::perfMapPath() << " has no line for the compiled kernel";
  ASSERT_NE(second, nullptr) << runtime::perfMapPath() << " has no line for the cached kernel";
  EXPECT_EQ(second->name, first->name);
  EXPECT_EQ(first->start, reinterpret_cast<uint64_t>(compiled)) << "a kernel's entry is its first byte";
  EXPECT_EQ(second->start, reinterpret_cast<uint64_t>(cached));
  EXPECT_GT(first->size, 16u);
  EXPECT_EQ(second->size, first->size);
}

TEST_F(PerfMap, OffLeavesAnEnginesKernelsOut) {
  { // the map is written and read in this process at all
    const ScopedEnv on("NNC_PERF_MAP", "on");
    auto witness = JitEngine::create(KernelCacheOptions{""});
    ASSERT_NE(witness->kernel(gemm(6)), nullptr);
    ASSERT_TRUE(named(readMap(), "nnc_gemm_m6_n29_k13_"));
  }
  for (const char* value : {"off", ""}) {
    const ScopedEnv off("NNC_PERF_MAP", *value ? std::optional<std::string>(value) : std::nullopt);
    auto jit = JitEngine::create(KernelCacheOptions{""});
    ASSERT_NE(jit->kernel(gemm(*value ? 4 : 5)), nullptr);
    EXPECT_FALSE(named(readMap(), *value ? "nnc_gemm_m4_n29_k13_" : "nnc_gemm_m5_n29_k13_")) << "NNC_PERF_MAP=" << value;
  }
}

TEST_F(PerfMap, OtherValuesAreUsageErrors) {
  const ScopedEnv bad("NNC_PERF_MAP", "maybe"); // yes is on, as for every on/off variable
  EXPECT_THROW(runtime::perfMapSetting(), UsageError);
  EXPECT_THROW(JitEngine::create(KernelCacheOptions{""}), UsageError);
}

} // namespace
} // namespace nnc::testing
