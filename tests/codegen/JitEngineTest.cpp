// The machinery around the kernels: the kernel cache, --emit llvm/asm output, the CPU
// table, the packed layout, the thread pool, and the errors Gemm::run reports.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>

#include "GemmReference.h"
#include "ScopedEnv.h"
#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/codegen/PackLayout.h"
#include "compiler/support/Error.h"
#include "runtime/jit/WeightPrefetch.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;
using nnc::test::ScopedEnv;

TEST(JitEngine, CacheCompilesARepeatedSpecOnce) {
  auto jit = runtime::JitEngine::create();
  GemmSpec s{5, 9, 3, true, Activation::Relu};
  void* first = jit->kernel(s);
  EXPECT_EQ(jit->kernelsCompiled(), 1u);
  EXPECT_EQ(jit->kernel(s), first);
  EXPECT_EQ(jit->kernel(GemmSpec{5, 9, 3, true, Activation::Relu}), first);
  EXPECT_EQ(jit->kernelsCompiled(), 1u);
  EXPECT_NE(jit->kernel(GemmSpec{5, 9, 3, true, Activation::Relu, true}), first);
  EXPECT_EQ(jit->kernelsCompiled(), 2u);
  EXPECT_GT(jit->compileMillis(), 0.0);
}

TEST(JitEngine, ConcurrentLookupsCompileEachKernelOnce) {
  auto jit = runtime::JitEngine::create();
  std::vector<std::thread> threads;
  std::vector<std::set<void*>> seen(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t n = 1; n <= 6; ++n) seen[size_t(t)].insert(jit->kernel(GemmSpec{3, n, 4}));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(jit->kernelsCompiled(), 6u);
  for (int t = 1; t < 4; ++t) EXPECT_EQ(seen[size_t(t)], seen[0]);
}

TEST(JitEngine, KeysDifferWhenCodeDiffers) {
  std::set<std::string> keys;
  for (Activation act : codegen::kAllActivations)
    for (bool bias : {false, true})
      for (bool residual : {false, true}) keys.insert(GemmSpec{2, 3, 4, bias, act, residual}.key());
  keys.insert(GemmSpec{2, 3, 5}.key());
  keys.insert(GemmSpec{2, 5, 3}.key());
  keys.insert(GemmSpec{23, 4, 5}.key()); // not confusable with m2..n34 etc.
  EXPECT_EQ(keys.size(), 8u * 2 * 2 + 3);
}

TEST(JitEngine, EmitLLVMHasConstantDimsAndNoDimParameters) {
  std::string ir = hostJit().emit(GemmSpec{64, 784, 256, true, Activation::Relu}, runtime::JitEngine::EmitForm::LLVM);
  const int W = hostJit().microKernel().vectorFloats;
  EXPECT_NE(ir.find("define void @" + codegen::gemmFunctionName(GemmSpec{64, 784, 256, true, Activation::Relu}, hostJit().microKernel()) + "(ptr"), std::string::npos);
  EXPECT_NE(ir.find("define void @nnc_gemm_m64_n784_k256_wf32_bias_relu_"), std::string::npos);
  // The only integer parameters are the panel and row-block ranges: M, N, K are constants.
  EXPECT_NE(ir.find("i64 %panelBegin, i64 %panelEnd, i64 %rowBlockBegin, i64 %rowBlockEnd)"),
            std::string::npos)
      << ir.substr(0, 2000);
  EXPECT_NE(ir.find("<" + std::to_string(W) + " x float>"), std::string::npos);
  // C's row stride N = 784 floats = 3136 bytes appears as a constant.
  EXPECT_TRUE(ir.find(" 784") != std::string::npos || ir.find(" 3136") != std::string::npos);
  if (hostJit().microKernel().fma) {
    EXPECT_NE(ir.find("@llvm.fma.v"), std::string::npos);
  }
}

TEST(JitEngine, EmitAsmUsesFmaOnlyWhenTheCpuHasIt) {
  std::string asmText = hostJit().emit(GemmSpec{64, 784, 256, true, Activation::Relu}, runtime::JitEngine::EmitForm::Assembly);
  if (hostJit().cpuFeatures().find("+fma") != std::string::npos) {
    EXPECT_NE(asmText.find("vfmadd"), std::string::npos);
  }
  auto baseline = runtime::JitEngine::create(runtime::JitTarget{"x86-64", ""});
  std::string sse = baseline->emit(GemmSpec{64, 784, 256, true, Activation::Relu}, runtime::JitEngine::EmitForm::Assembly);
  EXPECT_NE(sse.find("mulps"), std::string::npos);
  EXPECT_EQ(sse.find("vfmadd"), std::string::npos);
  EXPECT_EQ(sse.find("%ymm"), std::string::npos);
}

TEST(CpuTable, RowsFollowFeatures) {
  using codegen::CpuFeatures;
  using codegen::selectMicroKernel;
  EXPECT_STREQ(selectMicroKernel(CpuFeatures::parse("+avx,+avx2,+fma,-avx512f")).family, "avx2_fma");
  EXPECT_STREQ(selectMicroKernel(CpuFeatures::parse("+avx,+avx2,+fma,+avx512f")).family, "avx512");
  EXPECT_STREQ(selectMicroKernel(CpuFeatures::parse("+avx,+avx2,-fma,+avx512f")).family, "avx");
  EXPECT_STREQ(selectMicroKernel(CpuFeatures::parse("+avx,+avx2,-fma")).family, "avx");
  EXPECT_STREQ(selectMicroKernel(CpuFeatures::parse("+sse4.2,+avx512fp16")).family, "sse2");
  EXPECT_STREQ(selectMicroKernel(CpuFeatures::parse("")).family, "sse2");
  const auto& row = selectMicroKernel(CpuFeatures::parse("+avx2,+fma"));
  EXPECT_EQ(row.MR, 6);
  EXPECT_EQ(row.NR, 16);
  EXPECT_EQ(row.vectorFloats, 8);
}

// Rows are only ever offered to a CPU that has their features; the calibration runs
// between the FMA rows of a host that has both.
TEST(CpuTable, FeaturesMissingMeansNeverChosen) {
  using codegen::CpuFeatures;
  auto names = [](const std::vector<const codegen::MicroKernelShape*>& rows) {
    std::string out;
    for (auto* r : rows) out += std::string(out.empty() ? "" : ",") + r->family;
    return out;
  };
  EXPECT_EQ(names(codegen::executableRows(CpuFeatures::parse("+avx,+avx2,+fma,+avx512f"))),
            "avx512,avx2_fma,avx,sse2");
  EXPECT_EQ(names(codegen::executableRows(CpuFeatures::parse("+avx,+avx2,+fma"))), "avx2_fma,avx,sse2");
  EXPECT_EQ(names(codegen::executableRows(CpuFeatures::parse("+avx"))), "avx,sse2");
  EXPECT_EQ(names(codegen::executableRows(CpuFeatures::parse(""))), "sse2");
  EXPECT_EQ(names(codegen::rowsToCalibrate(CpuFeatures::parse("+avx,+avx2,+fma,+avx512f"))), "avx512,avx2_fma");
  EXPECT_EQ(names(codegen::rowsToCalibrate(CpuFeatures::parse("+avx,+avx2,+fma,-avx512f"))), "avx2_fma");
  EXPECT_EQ(names(codegen::rowsToCalibrate(CpuFeatures::parse("+avx512fp16,+avx"))), "");
  const auto& avx512 = *codegen::findMicroKernel("avx512");
  EXPECT_FALSE(codegen::canExecute(CpuFeatures::parse("+avx,+avx2,+fma"), avx512));
  EXPECT_FALSE(codegen::canExecute(CpuFeatures::parse("+avx512f"), *codegen::findMicroKernel("avx2")));
  EXPECT_TRUE(codegen::canExecute(CpuFeatures::parse(""), *codegen::findMicroKernel("sse2")));
  EXPECT_EQ(codegen::findMicroKernel("avx2"), codegen::findMicroKernel("avx2_fma"));
  EXPECT_EQ(codegen::findMicroKernel("avx512f"), nullptr);
  EXPECT_EQ(avx512.vectorFloats, 16);
  EXPECT_EQ(avx512.registers, 32);
  EXPECT_TRUE(avx512.maskedStores);
  EXPECT_EQ(avx512.NR % avx512.vectorFloats, 0);
  EXPECT_EQ(codegen::kernelFeatureOverrides(CpuFeatures::parse("+avx2,+fma,+avx512f"), avx512), "");
  // The 16-register rows keep their budgets (12 accumulators, 8 for one-vector blocks).
  const auto& avx2 = *codegen::findMicroKernel("avx2_fma");
  EXPECT_EQ(avx2.registers, 16);
  EXPECT_FALSE(avx2.maskedStores);
  EXPECT_EQ(codegen::accumulatorSets(1, avx2), 4);      // 2 chains × 4
  EXPECT_EQ(codegen::accumulatorSets(1, avx2, 1), 4);   // 1 × 4 <= 8
  EXPECT_EQ(codegen::accumulatorSets(3, avx2, 1), 2);   // 3 × 2 <= 8, 3 × 4 > 8
  EXPECT_EQ(codegen::accumulatorSets(5, avx2, 2), 1);
  EXPECT_EQ(codegen::accumulatorSets(1, avx512), 4);    // 2 chains × 4
  EXPECT_EQ(codegen::accumulatorSets(3, avx512), 2);    // 6 × 2 >= 8
  EXPECT_EQ(codegen::accumulatorSets(5, avx512, 1), 2); // 5 × 2 <= 16
}

// A row a target cannot execute is an error, never a silent fallback.
TEST(JitEngine, ARowTheTargetCannotExecuteThrows) {
  EXPECT_THROW(runtime::JitEngine::create(runtime::JitTarget{"x86-64", "+avx,+avx2,+fma", "avx512"}),
               std::runtime_error);
  EXPECT_THROW(runtime::JitEngine::create(runtime::JitTarget{"x86-64", "", "avx2"}), std::runtime_error);
  EXPECT_THROW(runtime::JitEngine::create(runtime::JitTarget{"x86-64", "", "avx1024"}), std::runtime_error);
  auto sse = runtime::JitEngine::create(runtime::JitTarget{"x86-64", "+avx,+avx2,+fma", "sse2"});
  EXPECT_STREQ(sse->microKernel().family, "sse2");
  EXPECT_EQ(sse->rowChoice(), "target row");
}

// NNC_ISA forces the host's row; an unknown or unexecutable one is a clear error.
TEST(JitEngine, NncIsaForcesTheHostRow) {
  const runtime::KernelCacheOptions none;
  EXPECT_STREQ(runtime::hostRowChoice(none, "sse2").row->family, "sse2");
  EXPECT_EQ(runtime::hostRowChoice(none, "sse2").how, "NNC_ISA");
  EXPECT_THROW(runtime::hostRowChoice(none, "avx1024"), std::runtime_error);
  if (!__builtin_cpu_supports("avx512f")) {
    EXPECT_THROW(runtime::hostRowChoice(none, "avx512"), std::runtime_error);
  }
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    EXPECT_THROW(runtime::hostRowChoice(none, "avx2"), std::runtime_error);
    return;
  }
  std::unique_ptr<runtime::JitEngine> jit;
  {
    ScopedEnv isa("NNC_ISA", "avx2");
    jit = runtime::JitEngine::create(none);
  }
  EXPECT_STREQ(jit->microKernel().family, "avx2_fma");
  EXPECT_EQ(jit->rowChoice(), "NNC_ISA");
  ScopedEnv bad("NNC_ISA", "no-such-row");
  EXPECT_THROW(runtime::JitEngine::create(none), std::runtime_error);
}

class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nnc_row_choice_XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

// Without NNC_ISA: the calibrated row (when the host has both FMA rows) is one the
// host can execute, the same for every engine of the process, and stored next to the
// kernel cache for later processes.
TEST(JitEngine, HostRowIsCalibratedOncePerProcess) {
  ScopedEnv unforced("NNC_ISA", std::nullopt);
  TempDir dir;
  runtime::RowChoice first = runtime::hostRowChoice(runtime::KernelCacheOptions{dir.path()}, "");
  std::printf("host row: %s (%s, %.1f ms, %s rate)", first.row->family, first.how.c_str(), first.millis,
              first.halfRate ? "half" : "full");
  for (auto& [family, gflops] : first.gflops) std::printf(" %s %.1f GFLOP/s", family.c_str(), gflops);
  std::printf("\n");
  codegen::CpuFeatures cpu;
  cpu.avx = __builtin_cpu_supports("avx"), cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma"), cpu.avx512f = __builtin_cpu_supports("avx512f");
  EXPECT_TRUE(codegen::canExecute(cpu, *first.row));
  EXPECT_STREQ(hostJit().microKernel().family, first.row->family);
  EXPECT_EQ(hostJit().microKernel().halfRate, first.halfRate);
  EXPECT_STREQ(runtime::hostRowChoice(runtime::KernelCacheOptions{}, "").row->family, first.row->family);
  if (codegen::rowsToCalibrate(cpu).size() < 2) return;
  EXPECT_EQ(first.how.rfind("calibrated", 0), 0u) << first.how;
  bool stored = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().extension() == ".row") {
      std::ifstream in(entry.path());
      std::string key, family, rate;
      std::getline(in, key), std::getline(in, family), std::getline(in, rate);
      stored = family == first.row->family && rate == (first.halfRate ? "half-rate" : "full-rate");
    }
  EXPECT_TRUE(stored);
}

// f16/bf16 weight prefetch (runtime/jit/WeightPrefetch.h): a host engine decides it at
// its first kernel with such weights, not before (f32 weights, and i4 under f32
// activations, keep their own ways); measured once per process and stored next to the
// kernel cache; NNC_PREFETCH_16BIT forces it; the kernels follow it (GemmPlan.h:
// streamPrefetchClass, Widened). It leaves the dot kernels' choice undecided.
TEST(JitEngine, HalfWeightPrefetchIsDecidedAtTheFirstKernelItConcerns) {
  ScopedEnv unforced("NNC_PREFETCH_16BIT", std::nullopt);
  TempDir dir;
  auto jit = runtime::JitEngine::create(runtime::KernelCacheOptions{dir.path()});
  const int64_t NR = jit->microKernel().NR;
  codegen::GemmSpec f32{1, 4 * NR, 256}, i4 = f32, f16 = f32;
  i4.weightType = DType::I4;
  i4.quantGroup = 32;
  f16.weightType = DType::F16;
  jit->kernel(f32);
  jit->kernel(i4);
  EXPECT_EQ(jit->weightPrefetch().how, "") << "decided before an f16/bf16 kernel";
  jit->kernel(f16);
  const runtime::WeightPrefetchChoice choice = jit->weightPrefetch();
  std::printf("f16/bf16 weights: %s\n", choice.describe().c_str());
  EXPECT_EQ(choice.how.rfind("measured", 0), 0u) << choice.how;
  EXPECT_EQ(jit->emit(f16, runtime::JitEngine::EmitForm::LLVM).find("@llvm.prefetch") != std::string::npos,
            choice.prefetch);
  EXPECT_NE(jit->emit(i4, runtime::JitEngine::EmitForm::LLVM).find("@llvm.prefetch"), std::string::npos);
  EXPECT_EQ(jit->dotWeightPrefetch().how, "") << "the dot kernels' choice decided by an f16 kernel";
  int stored = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().extension() == ".prefetch") {
      std::ifstream in(entry.path());
      std::string key, value;
      std::getline(in, key), std::getline(in, value);
      const auto read = runtime::parseWeightPrefetchLine(value); // what the next process reads
      stored += read && read->prefetch == choice.prefetch && (!choice.prefetch || read->bytes == choice.bytes);
    }
  EXPECT_EQ(stored, 1);

  for (const char* forced : {"on", "off", "1024", "4096"}) {
    ScopedEnv force("NNC_PREFETCH_16BIT", forced);
    auto fresh = runtime::JitEngine::create(runtime::KernelCacheOptions{});
    fresh->kernel(f16);
    EXPECT_EQ(fresh->weightPrefetch().how, "NNC_PREFETCH_16BIT");
    EXPECT_EQ(fresh->weightPrefetch().prefetch, std::string(forced) != "off");
    EXPECT_EQ(fresh->weightPrefetch().bytes, std::string(forced) == "1024" ? codegen::kShortHalfWeightPrefetchBytes
                                                                            : codegen::kHalfWeightPrefetchBytes);
  }
  ScopedEnv badValue("NNC_PREFETCH_16BIT", "sometimes");
  auto bad = runtime::JitEngine::create(runtime::KernelCacheOptions{});
  EXPECT_THROW(bad->kernel(f16), UsageError);
}

// The decode dot kernels over i8 weights and i4 × i8 (GemmPlan.h: streamPrefetchClass,
// Dot) follow a choice of their own, timed on an i4 × i8 GEMM of one row: decided at
// the first such kernel (not at i4 under f32 activations, nor at f16, whose choice is
// forced here), stored next to the kernel cache, forced by NNC_PREFETCH_DOT. Without it
// i8 weights under a dot kernel are not prefetched at all.
TEST(JitEngine, DotWeightPrefetchIsMeasuredOnItsOwn) {
  ScopedEnv unforced("NNC_PREFETCH_DOT", std::nullopt), widenedOn("NNC_PREFETCH_16BIT", "on");
  TempDir dir;
  auto jit = runtime::JitEngine::create(runtime::KernelCacheOptions{dir.path()});
  const std::string missing = codegen::missingDotInstructions(DType::I8, jit->features(), jit->microKernel());
  if (!missing.empty()) GTEST_SKIP() << "no i8 dot kernels on this row: it lacks " << missing;
  const int64_t NR = jit->microKernel().NR;
  codegen::GemmSpec i4{1, 4 * NR, 256}, f16 = i4, i8 = i4;
  i4.weightType = DType::I4;
  i4.quantGroup = 32;
  f16.weightType = DType::F16;
  i8.weightType = DType::I8;
  codegen::GemmSpec i4xi8 = i4;
  i4xi8.activationType = DType::I8;
  jit->kernel(i4);
  jit->kernel(f16);
  EXPECT_EQ(jit->dotWeightPrefetch().how, "") << "decided at i4 under f32 activations or at f16";
  EXPECT_EQ(jit->weightPrefetch().how, "NNC_PREFETCH_16BIT");
  jit->kernel(i4xi8);
  const runtime::WeightPrefetchChoice choice = jit->dotWeightPrefetch();
  std::printf("%s\n", jit->describeStreaming().c_str());
  EXPECT_EQ(choice.how.rfind("measured", 0), 0u) << choice.how;
  EXPECT_TRUE(jit->weightPrefetch().prefetch) << "the f16 choice, forced on, changed";
  auto prefetches = [](runtime::JitEngine& engine, const codegen::GemmSpec& spec) {
    return engine.emit(spec, runtime::JitEngine::EmitForm::LLVM).find("@llvm.prefetch") != std::string::npos;
  };
  const bool i8Dot = codegen::usesDotKernel(i8, jit->microKernel());
  if (i8Dot) {
    EXPECT_EQ(prefetches(*jit, i8), choice.prefetch);
  }
  int stored = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().extension() == ".dot-prefetch") {
      std::ifstream in(entry.path());
      std::string key, value;
      std::getline(in, key), std::getline(in, value);
      const auto read = runtime::parseWeightPrefetchLine(value); // what the next process reads
      stored += read && read->prefetch == choice.prefetch;
    }
  EXPECT_EQ(stored, 1);
  for (const bool on : {true, false}) {
    ScopedEnv force("NNC_PREFETCH_DOT", on ? "on" : "off");
    auto fresh = runtime::JitEngine::create(runtime::KernelCacheOptions{});
    fresh->kernel(i8Dot ? i8 : i4xi8);
    EXPECT_EQ(fresh->dotWeightPrefetch().how, "NNC_PREFETCH_DOT");
    EXPECT_EQ(fresh->dotWeightPrefetch().prefetch, on);
    if (i8Dot) {
      EXPECT_EQ(prefetches(*fresh, i8), on);
    }
  }
  ScopedEnv badValue("NNC_PREFETCH_DOT", "sometimes");
  auto bad = runtime::JitEngine::create(runtime::KernelCacheOptions{});
  EXPECT_THROW(bad->kernel(i4xi8), UsageError);
}

// Off only when the calls without were kPrefetchOffMargin faster; the calibration is an
// i4 × i8 GEMM of one row over as many bytes as the f16 one.
TEST(JitEngine, DotWeightPrefetchStaysUnlessClearlySlower) {
  using runtime::keepsDotWeightPrefetch;
  const double margin = runtime::kPrefetchOffMargin;
  EXPECT_TRUE(keepsDotWeightPrefetch(1.0, 1.0));
  EXPECT_TRUE(keepsDotWeightPrefetch(1.0, 1.0 - margin + 0.01));
  EXPECT_FALSE(keepsDotWeightPrefetch(1.0, 1.0 - margin - 0.01));
  EXPECT_FALSE(keepsDotWeightPrefetch(7.03, 5.42)); // Zen 4 guest, ms a call
  EXPECT_TRUE(keepsDotWeightPrefetch(1.0, 1.5));
  for (int64_t l3 : {int64_t(0), int64_t(32) << 20, int64_t(1) << 30}) {
    const codegen::CacheSizes caches{32 << 10, 1 << 20, l3};
    const codegen::GemmSpec s = runtime::dotPrefetchCalibrationSpec(caches);
    const codegen::GemmSpec f16 = runtime::weightPrefetchCalibrationSpec(caches);
    EXPECT_EQ(s.M, 1);
    EXPECT_EQ(s.weightType, DType::I4);
    EXPECT_EQ(s.activationType, DType::I8);
    EXPECT_EQ(s.K, f16.K);
    EXPECT_EQ(s.N * s.K / 2, f16.N * f16.K * 2) << "as many weight bytes";
  }
}

// The prefetch goes only when the calls without it were kPrefetchOffMargin faster; the
// calibration's weights outgrow L3 within the bounds.
TEST(JitEngine, HalfWeightPrefetchStaysUnlessClearlySlower) {
  using runtime::keepsWeightPrefetch;
  const double margin = runtime::kPrefetchOffMargin;
  EXPECT_TRUE(keepsWeightPrefetch({1.0, 1.0}));
  EXPECT_TRUE(keepsWeightPrefetch({1.0, 1.0 - margin + 0.01}));
  EXPECT_FALSE(keepsWeightPrefetch({1.0, 1.0 - margin - 0.01}));
  EXPECT_FALSE(keepsWeightPrefetch({2.69, 2.12}));
  EXPECT_TRUE(keepsWeightPrefetch({1.0, 1.5}));
  // With 1 KiB ahead timed too: the faster distance, then off against it. Xeon guest with
  // AMX, ms a call (4 KiB, none, 1 KiB): 1 KiB ahead, kept.
  using runtime::chosenWeightPrefetchBytes;
  const double shorter = runtime::kShortPrefetchMargin;
  EXPECT_EQ(chosenWeightPrefetchBytes({14.98, 15.40, 14.10}), codegen::kShortHalfWeightPrefetchBytes);
  EXPECT_TRUE(keepsWeightPrefetch({14.98, 15.40, 14.10}));
  EXPECT_EQ(chosenWeightPrefetchBytes({1.0, 1.0, 1.0 - shorter + 0.01}), codegen::kHalfWeightPrefetchBytes);
  EXPECT_EQ(chosenWeightPrefetchBytes({1.0, 1.0, 1.0 - shorter - 0.01}), codegen::kShortHalfWeightPrefetchBytes);
  EXPECT_EQ(chosenWeightPrefetchBytes({1.0, 1.0, 0.0}), codegen::kHalfWeightPrefetchBytes) << "1 KiB not timed";
  EXPECT_EQ(chosenWeightPrefetchBytes({1.0, 1.0, 1.5}), codegen::kHalfWeightPrefetchBytes);
  // The cache's lines, each way, and nothing else read as a choice.
  for (const runtime::WeightPrefetchSetting& setting :
       {runtime::WeightPrefetchSetting{false}, runtime::WeightPrefetchSetting{true},
        runtime::WeightPrefetchSetting{true, codegen::kShortHalfWeightPrefetchBytes}}) {
    const auto read = runtime::parseWeightPrefetchLine(runtime::weightPrefetchLine(setting));
    ASSERT_TRUE(read) << runtime::weightPrefetchLine(setting);
    EXPECT_EQ(read->prefetch, setting.prefetch);
    if (setting.prefetch) {
      EXPECT_EQ(read->bytes, setting.bytes);
    }
  }
  EXPECT_EQ(runtime::weightPrefetchLine({true, 1024}), "prefetch 1024");
  EXPECT_FALSE(runtime::parseWeightPrefetchLine("prefetch"));
  EXPECT_FALSE(runtime::parseWeightPrefetchLine("prefetch 2048"));
  // Off only against the faster distance: 0.91 is over 8 % under 1.0, not under 0.95.
  EXPECT_FALSE(keepsWeightPrefetch({1.0, 0.91, 1.2}));
  EXPECT_TRUE(keepsWeightPrefetch({1.0, 0.91, 0.95}));
  for (int64_t l3 : {int64_t(0), int64_t(8) << 20, int64_t(32) << 20, int64_t(1) << 30}) {
    const codegen::GemmSpec s = runtime::weightPrefetchCalibrationSpec({32 << 10, 1 << 20, l3});
    const int64_t bytes = s.N * s.K * 2;
    EXPECT_EQ(s.M, 1);
    EXPECT_EQ(s.weightType, DType::F16);
    EXPECT_GE(bytes, std::min(runtime::kMaxStreamBytes, std::max(runtime::kMinStreamBytes, l3 * runtime::kStreamL3Multiple)) - 64 * 2 * s.K);
    EXPECT_LE(bytes, runtime::kMaxStreamBytes);
  }
}

// One-row GEMMs over vpdpbusd on a row of 32 registers read their full panels two at
// a time or one (MicroKernelShape::pairsOneRowPanels), as the host measured
// (WeightPrefetch.h; stored next to the kernel cache) or NNC_PAIRED_PANELS says,
// decided at the first kernel that follows it, not at others (an f16 one). --generate
// defers the choice while it compiles the prompt's program, whose last layer runs at
// one row: the kernel built then (paired) and the decode program's (the choice) must
// link side by side in one engine.
TEST(JitEngine, OneRowPanelPairingIsChosenAndBothWaysLinkInOneEngine) {
  ScopedEnv unforcedPrefetch("NNC_PREFETCH_16BIT", "off"), unforcedPairs("NNC_PAIRED_PANELS", std::nullopt);
  codegen::GemmSpec i4{1, 4 * codegen::kMinDigitI4N, codegen::kMinDigitI4K}, f16 = i4;
  i4.weightType = DType::I4;
  i4.quantGroup = 32;
  f16.weightType = DType::F16;
  TempDir dir;
  auto measured = runtime::JitEngine::create(runtime::KernelCacheOptions{dir.path()});
  if (!codegen::followsPanelPairingChoice(i4, measured->microKernel()))
    GTEST_SKIP() << "no one-row digit products on a row of 32 registers here (" << measured->microKernel().family << ")";
  measured->kernel(f16);
  EXPECT_EQ(measured->panelPairing().how, "") << "decided at an f16 kernel";
  measured->kernel(i4);
  const runtime::PanelPairingChoice choice = measured->panelPairing();
  std::printf("%s\n", choice.describe().c_str());
  EXPECT_EQ(choice.how.rfind("measured", 0), 0u) << choice.how;
  EXPECT_EQ(measured->describeStreaming(), "software prefetch off (NNC_PREFETCH_16BIT); " + choice.describe());
  int stored = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().extension() == ".pairing") {
      std::ifstream in(entry.path());
      std::string key, line;
      std::getline(in, key), std::getline(in, line);
      stored += runtime::parsePanelPairingLine(line) == std::optional<bool>(choice.paired); // what the next process reads
    }
  EXPECT_EQ(stored, 1);

  for (const bool paired : {true, false}) {
    ScopedEnv force("NNC_PAIRED_PANELS", paired ? "on" : "off");
    auto jit = runtime::JitEngine::create(runtime::KernelCacheOptions{});
    jit->deferWeightPrefetchChoice(true);
    void* before = jit->kernel(i4); // the default: paired
    EXPECT_EQ(jit->panelPairing().how, "") << "decided while deferred";
    jit->deferWeightPrefetchChoice(false);
    void* after = jit->kernel(i4);
    EXPECT_EQ(jit->panelPairing().how, "NNC_PAIRED_PANELS");
    EXPECT_EQ(jit->panelPairing().paired, paired);
    EXPECT_EQ(before == after, paired) << "one kernel when the choice is the default, two otherwise";
    const std::string ir = jit->emit(i4, runtime::JitEngine::EmitForm::LLVM);
    EXPECT_EQ(ir.find("_single(") != std::string::npos, !paired) << "the symbol names the other way";
  }
  ScopedEnv badValue("NNC_PAIRED_PANELS", "sometimes");
  auto bad = runtime::JitEngine::create(runtime::KernelCacheOptions{});
  EXPECT_THROW(bad->kernel(i4), UsageError);
}

// One panel at a time only where it was kSinglePanelMargin faster; the pairing's
// calibration GEMM streams as many bytes as the prefetch's, one row of f32 × i4.
TEST(JitEngine, OneRowPanelsStayPairedUnlessOneAtATimeIsClearlyFaster) {
  using runtime::keepsPanelPairs;
  const double margin = runtime::kSinglePanelMargin;
  EXPECT_TRUE(keepsPanelPairs(1.0, 1.0));
  EXPECT_TRUE(keepsPanelPairs(1.0, 1.0 - margin + 0.01));
  EXPECT_FALSE(keepsPanelPairs(1.0, 1.0 - margin - 0.01));
  EXPECT_FALSE(keepsPanelPairs(7.59, 6.82)); // Zen 4 guest, ms a call
  EXPECT_TRUE(keepsPanelPairs(5.0, 5.5));
  for (bool paired : {true, false}) EXPECT_EQ(runtime::parsePanelPairingLine(runtime::panelPairingLine(paired)), paired);
  EXPECT_FALSE(runtime::parsePanelPairingLine("paired"));
  EXPECT_FALSE(runtime::parsePanelPairingLine(""));
  const codegen::CacheSizes caches{32 << 10, 1 << 20, int64_t(32) << 20};
  const codegen::GemmSpec f16 = runtime::weightPrefetchCalibrationSpec(caches);
  const codegen::GemmSpec i4 = runtime::panelPairingCalibrationSpec(caches);
  EXPECT_EQ(i4.M, 1);
  EXPECT_EQ(i4.weightType, DType::I4);
  EXPECT_EQ(i4.activationType, DType::F32);
  EXPECT_EQ(i4.N * i4.K / 2, f16.N * f16.K * 2);
}

// The calibration keeps the widest row unless a narrower one is more than
// kNarrowerRowMargin faster: a tie within the noise does not flip the choice (and the
// results' last bits) from process to process.
TEST(JitEngine, CalibrationKeepsTheWidestRowUnlessAnotherIsClearlyFaster) {
  using runtime::chooseCalibratedRow;
  const double margin = 1.0 + runtime::kNarrowerRowMargin;
  EXPECT_EQ(chooseCalibratedRow({{"avx512", 100.0}, {"avx2_fma", 100.0 * margin}}), 0u);
  EXPECT_EQ(chooseCalibratedRow({{"avx512", 100.0}, {"avx2_fma", 100.0 * margin + 0.5}}), 1u);
  EXPECT_EQ(chooseCalibratedRow({{"avx512", 100.0}, {"avx2_fma", 103.0}}), 0u);
  EXPECT_EQ(chooseCalibratedRow({{"avx512", 230.0}, {"avx2_fma", 118.0}}), 0u);
  EXPECT_EQ(chooseCalibratedRow({{"avx512", 100.0}, {"avx2_fma", 104.0}, {"avx", 120.0}}), 2u);
  EXPECT_EQ(chooseCalibratedRow({{"avx512", 100.0}}), 0u);
}

// Half rate: the widest row measured at less than kFullRateRatio times the next row's
// GFLOP/s (Zen 4's two-half 512-bit FMAs), not when it runs about twice as fast (Zen 5).
TEST(JitEngine, CalibrationMeasuresWhetherTheWidestRowRunsAtHalfRate) {
  using runtime::measuresHalfRate;
  EXPECT_TRUE(measuresHalfRate({{"avx512", 110.0}, {"avx2_fma", 108.0}}));
  EXPECT_TRUE(measuresHalfRate({{"avx512", 100.0}, {"avx2_fma", 112.0}}));
  EXPECT_TRUE(measuresHalfRate({{"avx512", 100.0 * runtime::kFullRateRatio - 0.5}, {"avx2_fma", 100.0}}));
  EXPECT_FALSE(measuresHalfRate({{"avx512", 100.0 * runtime::kFullRateRatio}, {"avx2_fma", 100.0}}));
  EXPECT_FALSE(measuresHalfRate({{"avx512", 265.0}, {"avx2_fma", 134.0}}));
  EXPECT_FALSE(measuresHalfRate({{"avx512", 100.0}}));
  EXPECT_FALSE(measuresHalfRate({}));
}

// An AVX-512 host builds the AVX2 row's kernels without AVX-512: no EVEX-only
// registers (ymm16-31) in the code, and the engine's feature list says so.
TEST(CpuTable, Avx2RowKernelsStayInTheRowsInstructionSet) {
  using codegen::CpuFeatures;
  const auto& avx2 = codegen::selectMicroKernel(CpuFeatures::parse("+avx2,+fma"));
  EXPECT_EQ(codegen::kernelFeatureOverrides(CpuFeatures::parse("+avx2,+fma,+avx512f"), avx2), "-avx512f");
  EXPECT_EQ(codegen::kernelFeatureOverrides(CpuFeatures::parse("+avx2,+fma"), avx2), "");
  auto zen4 = runtime::JitEngine::create(runtime::JitTarget{"znver4", "", "avx2"}, runtime::KernelCacheOptions{});
  EXPECT_STREQ(zen4->microKernel().family, "avx2_fma");
  EXPECT_EQ(zen4->cpuFeatures().find("+avx512f"), std::string::npos) << zen4->cpuFeatures();
  EXPECT_NE(zen4->cpuFeatures().find("+fma"), std::string::npos);
  std::string text = zen4->emit(GemmSpec{64, 784, 256, true, Activation::Relu}, runtime::JitEngine::EmitForm::Assembly);
  EXPECT_NE(text.find("vfmadd"), std::string::npos);
  for (int r = 16; r < 32; ++r)
    EXPECT_EQ(text.find("%ymm" + std::to_string(r)), std::string::npos) << "ymm" << r;
  EXPECT_EQ(text.find("%zmm"), std::string::npos);
}

// A narrower row forced on a wider host compiles what a host with only the row's
// instructions would run, so that the tests of every row test that code: the AVX row
// has no AVX2, FMA or AVX-VNNI (NNC_ISA=avx ran vpdpbusd, --activations i8 included),
// the SSE2 row nothing beyond x86-64's baseline (it used VEX encodings and F16C).
TEST(CpuTable, NarrowerRowsStayInTheirInstructionSets) {
  using codegen::CpuFeatures;
  const auto* avx = codegen::findMicroKernel("avx");
  const auto* sse2 = codegen::findMicroKernel("sse2");
  ASSERT_TRUE(avx && sse2);
  EXPECT_EQ(codegen::kernelFeatureOverrides(CpuFeatures::parse("+avx,+avx2,+fma,+avxvnni"), *avx), "-avx2,-fma");
  EXPECT_EQ(codegen::kernelFeatureOverrides(CpuFeatures::parse("+avx,+f16c"), *avx), "");
  EXPECT_EQ(codegen::kernelFeatureOverrides(CpuFeatures::parse("+avx,+avx2,+fma"), *sse2), "-sse3");
  EXPECT_EQ(codegen::kernelFeatureOverrides(CpuFeatures::parse(""), *sse2), "");

  auto onAvx = runtime::JitEngine::create(runtime::JitTarget{"sapphirerapids", "", "avx"}, runtime::KernelCacheOptions{});
  const std::string avxFeatures = onAvx->cpuFeatures();
  for (const char* gone : {"+avx2", "+fma", "+avxvnni", "+avx512f", "+avx512vnni"})
    EXPECT_EQ((avxFeatures + ",").find(std::string(gone) + ","), std::string::npos) << gone << ": " << avxFeatures;
  EXPECT_NE((avxFeatures + ",").find("+f16c,"), std::string::npos) << avxFeatures;
  EXPECT_FALSE(onAvx->microKernel().digitProducts);
  EXPECT_NE(codegen::missingDotInstructions(DType::I8, onAvx->features(), onAvx->microKernel()), "");
  const std::string avxCode =
      onAvx->emit(GemmSpec{64, 784, 256, true, Activation::Relu}, runtime::JitEngine::EmitForm::Assembly);
  for (const char* op : {"vfmadd", "vpdpbusd", "%zmm", "vpbroadcastd"})
    EXPECT_EQ(avxCode.find(op), std::string::npos) << op;

  auto onSse2 = runtime::JitEngine::create(runtime::JitTarget{"sapphirerapids", "", "sse2"}, runtime::KernelCacheOptions{});
  EXPECT_EQ((onSse2->cpuFeatures() + ",").find("+avx,"), std::string::npos) << onSse2->cpuFeatures();
  GemmSpec half{16, 64, 32, true, Activation::Relu};
  half.weightType = DType::F16;
  const std::string sseCode = onSse2->emit(half, runtime::JitEngine::EmitForm::Assembly);
  for (const char* op : {"vcvtph2ps", "vmov", "%ymm", "pmovzx", "pshufb"}) EXPECT_EQ(sseCode.find(op), std::string::npos) << op;
}

// A target without a row gets its widest: AVX-512 code (zmm, 32 registers) for Zen 4.
TEST(CpuTable, TargetsDefaultToTheirWidestRow) {
  auto zen4 = runtime::JitEngine::create(runtime::JitTarget{"znver4", ""}, runtime::KernelCacheOptions{});
  EXPECT_STREQ(zen4->microKernel().family, "avx512");
  EXPECT_EQ(zen4->rowChoice(), "target");
  EXPECT_NE(zen4->cpuFeatures().find("+avx512f"), std::string::npos);
  std::string text = zen4->emit(GemmSpec{64, 784, 256, true, Activation::Relu}, runtime::JitEngine::EmitForm::Assembly);
  EXPECT_NE(text.find("%zmm"), std::string::npos);
}

TEST(PackLayout, PanelsAreKMajorAndZeroPadded) {
  codegen::PanelLayout layout{5, 3, 4}; // 2 panels, the second holds 1 column
  std::vector<float> W(15);
  for (int n = 0; n < 5; ++n)
    for (int k = 0; k < 3; ++k) W[size_t(n * 3 + k)] = float(100 * n + k + 1);
  std::vector<float> packed(size_t(layout.totalElements()), -1.0f);
  codegen::packWeightsPanelF32(layout, W.data(), packed.data());
  EXPECT_EQ(packed.size(), 24u);
  EXPECT_EQ(packed[0], 1.0f);         // (n0, k0)
  EXPECT_EQ(packed[1], 101.0f);       // (n1, k0)
  EXPECT_EQ(packed[4], 2.0f);         // (n0, k1)
  EXPECT_EQ(packed[12], 401.0f);      // (n4, k0) starts panel 1
  for (int k = 0; k < 3; ++k)
    for (int j = 1; j < 4; ++j) EXPECT_EQ(packed[size_t(12 + 4 * k + j)], 0.0f);
  runtime::Gemm gemm(hostJit(), GemmSpec{1, 5, 3});
  auto weights = gemm.pack(W.data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weights.data()) % codegen::kPackedAlignmentBytes, 0u);
}

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    runtime::ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallelFor(n, [&](int64_t i) { hits[size_t(i)]++; });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "threads=" << threads << " n=" << n;
    }
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  runtime::ThreadPool pool(1);
  std::thread::id caller = std::this_thread::get_id(), ran;
  pool.parallelFor(3, [&](int64_t) { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, caller);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  runtime::ThreadPool pool(2);
  EXPECT_THROW(pool.parallelFor(50, [](int64_t i) { if (i == 17) throw std::runtime_error("x"); }),
               std::runtime_error);
  std::atomic<int> count{0};
  pool.parallelFor(10, [&](int64_t) { count++; }); // still usable afterwards
  EXPECT_EQ(count.load(), 10);
}

TEST(Gemm, RejectsMismatchedInputs) {
  runtime::Gemm gemm(hostJit(), GemmSpec{2, 3, 4, true, Activation::None, true});
  std::vector<float> W(12, 1.0f), A(8, 1.0f), bias(3), res(6), C(6);
  auto packed = gemm.pack(W.data());
  EXPECT_THROW(gemm.run(A.data(), packed, nullptr, res.data(), C.data()), std::invalid_argument);
  EXPECT_THROW(gemm.run(A.data(), packed, bias.data(), nullptr, C.data()), std::invalid_argument);
  runtime::Gemm other(hostJit(), GemmSpec{2, 4, 3});
  EXPECT_THROW(gemm.run(A.data(), other.pack(W.data()), bias.data(), res.data(), C.data()),
               std::invalid_argument);
  EXPECT_THROW(hostJit().kernel(GemmSpec{0, 3, 4}), std::invalid_argument);
  GemmSpec i32{2, 3, 4};
  i32.weightType = DType::I32; // not a storage dtype
  EXPECT_THROW(hostJit().kernel(i32), std::invalid_argument);
  GemmSpec i4{2, 3, 4};
  i4.weightType = DType::I4; // without a scale group
  EXPECT_THROW(hostJit().kernel(i4), std::invalid_argument);
  gemm.run(A.data(), packed, bias.data(), res.data(), C.data());
  EXPECT_EQ(C[0], 4.0f); // 4 ones · ones + 0 bias + 0 residual
}

} // namespace
} // namespace nnc::testing
