// LLJIT set-up, the kernel pass pipeline, the kernel caches (in memory and on disk) and the
// IR/assembly printers.
#include "runtime/jit/JitEngine.h"
#include "runtime/EnvironmentSwitch.h"

#include "runtime/ThreadPool.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <sys/syscall.h>
#include <unistd.h>
#include <unordered_map>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/codegen/KernelModules.h"
#include "compiler/support/Error.h"
#include "compiler/codegen/VectorMath.h"
#include "runtime/jit/CodeFingerprint.h"
#include "runtime/jit/Gemm.h"
#include "runtime/jit/ObjectCache.h"
#include "runtime/jit/PerfMap.h"
#include "runtime/jit/StackSizes.h"
#include "runtime/jit/WeightPrefetch.h"

namespace nnc::runtime {

namespace {

using codegen::ModuleFactory;

template <typename T> T unwrap(llvm::Expected<T> value, const char* what) {
  if (!value) throw std::runtime_error(std::string(what) + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}
void check(llvm::Error err, const char* what) {
  if (err) throw std::runtime_error(std::string(what) + ": " + llvm::toString(std::move(err)));
}

void initialiseLLVMOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

// The kernels arrive already vectorised, register-blocked and unrolled where it pays
// (their loops that must not be unrolled further say so), so most of the O3 pipeline
// (loop and SLP vectorisers, unswitching, loop idiom, IPO, its second round of loop
// passes) finds nothing to improve and costs 2-4x the time of the passes that matter
// here: SROA (accumulator slots to registers), CSE/InstCombine/SimplifyCFG
// (constant-shape address and control folding), LICM (row pointers and bias out of
// the K loop), GVN (redundant loads) and the unroller for the emitters' other short
// loops. Checked on the MLP's kernels: the same vector code and inner loops,
// instruction for instruction, as O3; the loop nest around them keeps a few more
// scalar spills (O3's unswitching removes them, measured to make no difference).
constexpr const char* kKernelPipeline =
    "function(sroa<modify-cfg>,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-mssa(licm),gvn,instcombine<no-verify-fixpoint>,simplifycfg,loop-unroll<O3>,"
    "instcombine<no-verify-fixpoint>,simplifycfg)";

void optimise(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  check(pb.parsePassPipeline(mpm, kKernelPipeline), "building the kernel pass pipeline");
  mpm.run(m, mam);
}

using Clock = std::chrono::steady_clock;
double millisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One kernel to make ready: its in-memory key, its symbol and how to build its IR.
struct Request {
  std::string key, symbol;
  ModuleFactory build;
};

// A kernel compiled to an object file (on a worker thread), with its stage times.
struct CompiledObject {
  std::unique_ptr<llvm::MemoryBuffer> object;
  size_t stackBytes = 0; // objectStackBytes
  double emitMillis = 0, optimiseMillis = 0, codegenMillis = 0;
  std::exception_ptr error;
};

// What the target machine will really use ("+avx2,+fma,..."): its subtarget's feature
// bits, after LLVM resolved implications (e.g. -avx512f also turns off avx512vl).
std::string enabledFeatures(const llvm::TargetMachine& tm) {
  const llvm::MCSubtargetInfo& sti = *tm.getMCSubtargetInfo();
  std::string out;
  for (const llvm::SubtargetFeatureKV& kv : sti.getAllProcessorFeatures())
    if (sti.getFeatureBits()[kv.Value]) out += (out.empty() ? "+" : ",+") + std::string(kv.Key);
  return out;
}

// Linux hands a process the AMX tile state only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, once per process, for all its threads);
// without it the first tile instruction faults. Asked the first time an engine's
// target has AMX; a refusal (older kernel, other OS) leaves the tile kernels off.
bool tileStatePermitted() {
  static const bool permitted = [] {
#if defined(__linux__) && defined(__x86_64__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return permitted;
}

// NNC_DIGIT_PRODUCTS: unset or "on", f32 × i8 and f32 × i4 GEMMs use digit products
// where the row can (CpuTable.h: MicroKernelShape::digitProducts); "off", never (the
// f32 kernel widens the weights). Anything else is a usage error.
bool digitProductsAllowed() { return environmentSwitch("NNC_DIGIT_PRODUCTS").value_or(true); }

} // namespace

struct JitEngine::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit; // links the kernels' objects and resolves symbols
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::unique_ptr<llvm::TargetMachine> tm; // for emitLLVM/emitAsm, under tmMutex
  std::mutex tmMutex;
  std::string cpu, features;
  codegen::CpuFeatures parsedFeatures; // `features`, parsed
  codegen::MicroKernelShape shape{}; // the table's row, with what the host measured
  std::string rowChoice; // how `shape` was chosen
  // A weight-prefetch choice (WeightPrefetchChoice) for one class of kernels
  // (codegen::StreamPrefetchClass): decided once, at the first kernel that needs it
  // (shapeFor), measured when measuresPrefetch; `shape` with it applied.
  struct PrefetchDecision {
    std::once_flag once;
    WeightPrefetchChoice choice;
    std::atomic<bool> decided{false};
    codegen::MicroKernelShape shape{};
    WeightPrefetchChoice published() const { // before decided (release/acquire): the empty choice
      return decided.load(std::memory_order_acquire) ? choice : WeightPrefetchChoice{};
    }
  };
  bool measuresPrefetch = false;
  std::string cacheDir; // where the measured choices are stored ("" = nowhere)
  PrefetchDecision widened, dot;
  // widened.shape for the kernels whose prefetch distance is their own: one key whatever the distance.
  codegen::MicroKernelShape widenedOwnDistance{};
  std::atomic<bool> deferChoice{false}; // JitEngine::deferWeightPrefetchChoice
  // One-row GEMMs' panel pairing (PanelPairingChoice): decided once, the same way.
  std::once_flag pairingOnce;
  PanelPairingChoice pairing;
  std::atomic<bool> pairingDecided{false};

  std::unique_ptr<DiskObjectCache> disk; // null: no disk cache

  // Held while kernels are made ready: each key compiles once. Guards all below.
  mutable std::mutex cacheMutex;
  struct ReadyKernel {
    void* address;
    size_t stackBytes; // objectStackBytes of its object
  };
  std::unordered_map<std::string, ReadyKernel> kernels;
  CompileStats stats;
  std::vector<std::unique_ptr<llvm::TargetMachine>> workerTMs; // one per compile thread

  std::string cacheKey(const std::string& specKey, const codegen::MicroKernelShape& row) const {
    return specKey + "|" + cpu + "|" + features + "|" + row.family + (row.halfRate ? "|half-rate" : "") +
           (row.prefetchesStreamedWeights ? "" : "|no-weight-prefetch") +
           (row.halfWeightPrefetchBytes == codegen::kHalfWeightPrefetchBytes
                ? ""
                : "|weight-prefetch-" + std::to_string(row.halfWeightPrefetchBytes)) +
           (row.digitProducts ? "" : "|no-digit-products") + (row.pairsOneRowPanels ? "" : "|single-panels") +
           (row.bytePairs ? "|byte-pairs" : "");
  }

  // The row a kernel is built for: `shape`, with the weight prefetch and the panel
  // pairing decided for the kernels that follow them.
  codegen::MicroKernelShape shapeFor(const codegen::KernelSpec& spec) {
    const codegen::GemmSpec* gemm = std::get_if<codegen::GemmSpec>(&spec);
    if (auto* conv = std::get_if<codegen::ConvGemmSpec>(&spec)) gemm = &conv->gemm;
    if (!gemm) return shape;
    const codegen::StreamPrefetchClass prefetchClass = codegen::streamPrefetchClass(*gemm, shape);
    const bool pairs = codegen::followsPanelPairingChoice(*gemm, shape);
    codegen::MicroKernelShape out = shape; // while a choice is deferred, its default; the key says which (cacheKey)
    const bool deferred = deferChoice.load();
    if (prefetchClass != codegen::StreamPrefetchClass::None) {
      const bool isDot = prefetchClass == codegen::StreamPrefetchClass::Dot;
      PrefetchDecision& d = isDot ? dot : widened;
      if (!deferred || d.decided.load(std::memory_order_acquire)) {
        std::call_once(d.once, [this, isDot] { isDot ? decideDotPrefetch() : decideWeightPrefetch(); });
        out = isDot || codegen::followsHalfWeightPrefetchDistance(*gemm) ? d.shape : widenedOwnDistance;
      }
    }
    if (pairs && (!deferred || pairingDecided.load(std::memory_order_acquire))) {
      std::call_once(pairingOnce, [this] { decidePanelPairing(); });
      out.pairsOneRowPanels = pairing.paired;
    }
    return out;
  }
  void decideWeightPrefetch();
  static WeightPrefetchChoice hostWeightPrefetch(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                                 const codegen::MicroKernelShape& row, const std::string& dir);
  void decideDotPrefetch();
  static WeightPrefetchChoice hostDotPrefetch(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                              const codegen::MicroKernelShape& row, const std::string& dir);
  void decidePanelPairing();
  // The calibration spec's seconds a call (timeStreamedGemms) on two engines of `row`
  // that differ in weight prefetch or panel pairing, as given for each.
  static std::vector<double> timeTwoWays(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                         const codegen::MicroKernelShape& row, const codegen::GemmSpec& spec,
                                         std::array<bool, 2> prefetches, std::array<bool, 2> pairs);
  static PanelPairingChoice hostPanelPairing(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                             const codegen::MicroKernelShape& row, const std::string& dir);
  Request requestOf(const codegen::KernelSpec& spec);
  // The disk cache's key: also what built the code, so no other build reuses it.
  std::string diskKey(const std::string& key) const { return key + "|" + codeFingerprint(); }

  // The kernel from the disk cache, linked; nullopt when there is none or it does not
  // link (its symbols are then removed again, so the kernel can be compiled instead).
  // An object that does not say its stack sizes is not linked either.
  std::optional<ReadyKernel> loadCached(const std::string& key, const std::string& symbol) {
    std::unique_ptr<llvm::MemoryBuffer> object = disk->load(diskKey(key));
    if (!object) return std::nullopt;
    const std::optional<size_t> stackBytes = objectStackBytes(object->getMemBufferRef());
    if (!stackBytes) return std::nullopt;
    llvm::orc::ResourceTrackerSP tracker = jit->getMainJITDylib().createResourceTracker();
    llvm::Expected<llvm::orc::ExecutorAddr> address = [&]() -> llvm::Expected<llvm::orc::ExecutorAddr> {
      if (llvm::Error err = jit->addObjectFile(tracker, std::move(object))) return err;
      return jit->lookup(symbol);
    }();
    if (address) return ReadyKernel{address->toPtr<void*>(), *stackBytes};
    llvm::consumeError(address.takeError());
    llvm::consumeError(tracker->remove());
    return std::nullopt;
  }

  // Target triple, data layout and per-function CPU attributes; then the verifier.
  void finishModule(llvm::Module& m) const {
    m.setDataLayout(jit->getDataLayout());
    m.setTargetTriple(jit->getTargetTriple().str());
    for (llvm::Function& f : m)
      if (!f.isDeclaration()) {
        f.addFnAttr("target-cpu", cpu);
        f.addFnAttr("target-features", tm->getTargetFeatureString());
      }
    std::string problems;
    llvm::raw_string_ostream os(problems);
    if (llvm::verifyModule(m, &os))
      throw std::runtime_error("nnc internal error: emitted kernel is invalid IR: " + os.str());
  }

  // IR → kernel pipeline → object file, with `workerTM` (used by this thread only). The object goes
  // through LLVM's SimpleCompiler with the disk cache as its llvm::ObjectCache, which
  // stores it under the module's name, the disk key. Never throws: errors are returned.
  CompiledObject compileObject(const Request& request, llvm::TargetMachine& workerTM) const {
    CompiledObject out;
    try {
      auto start = Clock::now();
      llvm::LLVMContext ctx;
      std::unique_ptr<llvm::Module> m = request.build(ctx);
      finishModule(*m);
      m->setModuleIdentifier(diskKey(request.key));
      out.emitMillis = millisSince(start);
      start = Clock::now();
      optimise(*m, workerTM);
      out.optimiseMillis = millisSince(start);
      start = Clock::now();
      llvm::orc::SimpleCompiler compiler(workerTM, disk.get());
      out.object = unwrap(compiler(*m), "compiling kernel");
      out.codegenMillis = millisSince(start);
      const std::optional<size_t> stackBytes = objectStackBytes(out.object->getMemBufferRef());
      if (!stackBytes) throw std::runtime_error("nnc internal error: a compiled kernel's object has no .stack_sizes");
      out.stackBytes = *stackBytes;
    } catch (...) {
      out.error = std::current_exception();
    }
    return out;
  }

  // Makes every requested kernel ready: from the in-memory map, else linked from the
  // disk cache, else compiled — the compiles spread over up to one thread per CPU
  // (each kernel is its own module and context, so they are independent) and linked
  // here, in request order.
  void makeReady(const std::vector<Request>& requests) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto start = Clock::now();
    std::vector<const Request*> todo;
    for (const Request& r : requests) {
      if (kernels.count(r.key) ||
          std::any_of(todo.begin(), todo.end(), [&](const Request* t) { return t->key == r.key; }))
        continue;
      if (disk) {
        auto loadStart = Clock::now();
        if (std::optional<ReadyKernel> cached = loadCached(r.key, r.symbol)) {
          stats.loadMillis += millisSince(loadStart);
          ++stats.fromCache;
          kernels.emplace(r.key, *cached);
          continue;
        }
      }
      todo.push_back(&r);
    }

    std::vector<CompiledObject> objects(todo.size());
    size_t threads = std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
    while (workerTMs.size() < threads)
      workerTMs.push_back(unwrap(jtmb->createTargetMachine(), "creating target machine"));
    if (threads == 1) {
      objects[0] = compileObject(*todo[0], *workerTMs[0]);
    } else if (threads > 1) {
      std::atomic<size_t> next{0};
      runEach(threads, [&](size_t w) {
        for (size_t i; (i = next.fetch_add(1)) < todo.size();) objects[i] = compileObject(*todo[i], *workerTMs[w]);
      });
    }

    auto linkStart = Clock::now();
    for (size_t i = 0; i < todo.size(); ++i) {
      CompiledObject& o = objects[i];
      if (o.error) std::rethrow_exception(o.error);
      check(jit->addObjectFile(std::move(o.object)), "adding kernel object");
      void* address = unwrap(jit->lookup(todo[i]->symbol), "linking kernel").toPtr<void*>();
      kernels.emplace(todo[i]->key, ReadyKernel{address, o.stackBytes});
      stats.emitMillis += o.emitMillis;
      stats.optimiseMillis += o.optimiseMillis;
      stats.codegenMillis += o.codegenMillis;
      ++stats.compiled;
    }
    stats.linkMillis += millisSince(linkStart);
    stats.totalMillis += millisSince(start);
  }

  ReadyKernel ready(const Request& request) {
    makeReady({request});
    std::lock_guard<std::mutex> lock(cacheMutex);
    return kernels.at(request.key);
  }

  std::string print(const ModuleFactory& build, bool assembly) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = build(ctx);
    finishModule(*m);
    std::lock_guard<std::mutex> lock(tmMutex);
    optimise(*m, *tm);
    llvm::SmallString<0> text;
    llvm::raw_svector_ostream os(text);
    if (!assembly) {
      m->print(os, nullptr);
    } else {
      llvm::legacy::PassManager pm;
      if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
        throw std::runtime_error("this target cannot emit assembly");
      pm.run(*m);
    }
    return std::string(text.str());
  }
};

KernelCacheOptions KernelCacheOptions::fromEnvironment() {
  return KernelCacheOptions{kernelCacheDirFromEnvironment()};
}

std::unique_ptr<JitEngine> JitEngine::create() { return create(KernelCacheOptions::fromEnvironment()); }

std::unique_ptr<JitEngine> JitEngine::create(const JitTarget& target) {
  return create(target, KernelCacheOptions::fromEnvironment());
}

std::unique_ptr<JitEngine> JitEngine::create(const KernelCacheOptions& cache) {
  initialiseLLVMOnce();
  RowChoice choice = hostRowChoice(cache);
  return createFor(unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting host CPU"),
                   cache, choice.row->family, choice.how, choice.halfRate, /*prefetchesStreamedWeights=*/true,
                   /*measuresWeightPrefetch=*/true);
}

namespace {
// The calibration: kCalibrationGemm on each candidate row's engine (compiled side by
// side), then rounds of one timed call per row, interleaved, best per row.
std::vector<std::pair<std::string, double>> timeRows(std::vector<std::unique_ptr<JitEngine>>& engines) {
  const codegen::GemmSpec spec{kCalibrationGemm[0], kCalibrationGemm[1], kCalibrationGemm[2]};
  std::vector<std::unique_ptr<Gemm>> gemms(engines.size());
  runEach(engines.size(), [&](size_t i) { gemms[i] = std::make_unique<Gemm>(*engines[i], spec); });
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> A(size_t(spec.M * spec.K)), W(size_t(spec.N * spec.K)), C(size_t(spec.M * spec.N));
  for (float& x : A) x = uni(rng);
  for (float& x : W) x = uni(rng);
  std::vector<PackedWeights> packed;
  for (auto& g : gemms) packed.push_back(g->pack(W.data()));
  constexpr int kRounds = 7;
  std::vector<double> best(engines.size(), 1e30);
  for (int round = -1; round < kRounds; ++round) // round -1 warms up
    for (size_t i = 0; i < gemms.size(); ++i) {
      auto start = Clock::now();
      gemms[i]->run(A.data(), packed[i], nullptr, nullptr, C.data());
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (round >= 0) best[i] = std::min(best[i], seconds);
    }
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < engines.size(); ++i)
    out.emplace_back(engines[i]->microKernel().family, 2.0 * double(spec.M * spec.N * spec.K) / best[i] * 1e-9);
  return out;
}

// A host's measured choices are stored next to the kernel cache as small text files:
// "<key>\n" then the choice's lines; `extension` names the kind.
std::string choicePath(const std::string& dir, const std::string& key, const std::string& extension) {
  std::string path = DiskObjectCache(dir).pathFor(key);
  return path.substr(0, path.size() - 2) + extension;
}
// The stored lines after the key; empty when none are stored for the key.
std::vector<std::string> readChoice(const std::string& dir, const std::string& key, const std::string& extension,
                                    size_t lines) {
  const std::string path = choicePath(dir, key, extension);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {}; // not a FIFO or /dev/zero (see ObjectCache.cpp)
  std::ifstream in(path);
  std::string storedKey;
  if (!std::getline(in, storedKey) || storedKey != key) return {};
  std::vector<std::string> out(lines);
  for (std::string& line : out)
    if (!std::getline(in, line)) return {};
  return out;
}
void storeChoice(const std::string& dir, const std::string& key, const std::string& extension,
                 const std::vector<std::string>& lines) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = choicePath(dir, key, extension), temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp);
    out << key << "\n";
    for (const std::string& line : lines) out << line << "\n";
    if (!out) return;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) std::remove(temp.c_str()); // best effort
}

// The row: "<key>\n<family>\n<half-rate|full-rate>\n" (RowChoice::halfRate).
struct StoredRow {
  std::string family; // "" when none is stored for the key
  bool halfRate = false;
  bool operator==(const StoredRow& o) const { return family == o.family && halfRate == o.halfRate; }
};
StoredRow readStoredRow(const std::string& dir, const std::string& key) {
  std::vector<std::string> lines = readChoice(dir, key, ".row", 2);
  if (lines.empty() || (lines[1] != "half-rate" && lines[1] != "full-rate")) return {};
  return {lines[0], lines[1] == "half-rate"};
}
void storeRow(const std::string& dir, const std::string& key, const RowChoice& choice) {
  storeChoice(dir, key, ".row", {choice.row->family, choice.halfRate ? "half-rate" : "full-rate"});
}
} // namespace

bool measuresHalfRate(const std::vector<std::pair<std::string, double>>& gflops) {
  return gflops.size() >= 2 && gflops[0].second < gflops[1].second * kFullRateRatio;
}

size_t chooseCalibratedRow(const std::vector<std::pair<std::string, double>>& gflops) {
  size_t best = 0;
  for (size_t i = 1; i < gflops.size(); ++i)
    if (gflops[i].second > gflops[best].second) best = i;
  return best > 0 && gflops[best].second <= gflops[0].second * (1.0 + kNarrowerRowMargin) ? 0 : best;
}

RowChoice hostRowChoice(const KernelCacheOptions& cache) {
  const char* env = std::getenv("NNC_ISA");
  return hostRowChoice(cache, env ? env : "");
}

RowChoice hostRowChoice(const KernelCacheOptions& cache, const std::string& forced) {
  initialiseLLVMOnce();
  auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting host CPU");
  const std::string cpu = jtmb.getCPU();
  const std::string features = enabledFeatures(*unwrap(jtmb.createTargetMachine(), "creating target machine"));
  const codegen::CpuFeatures f = codegen::CpuFeatures::parse(features);
  RowChoice choice;
  if (!forced.empty()) {
    choice.row = codegen::findMicroKernel(forced);
    if (!choice.row)
      throw UsageError("NNC_ISA=" + forced + ": no such kernel row (avx512, avx2, avx, sse2)");
    if (!codegen::canExecute(f, *choice.row))
      throw UsageError("NNC_ISA=" + forced + ": this CPU (" + cpu + ") cannot execute the " + choice.row->family +
                       " row's instructions");
    choice.how = "NNC_ISA";
    return choice;
  }
  std::vector<const codegen::MicroKernelShape*> candidates = codegen::rowsToCalibrate(f);
  if (candidates.size() < 2) {
    choice.row = &codegen::selectMicroKernel(f);
    choice.how = "widest row";
    return choice;
  }
  // Once per process per CPU (a host's CPU does not change, but tests build others).
  static std::mutex mutex;
  static std::map<std::string, RowChoice> measured;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string key = "row-choice|" + cpu + "|" + features + "|" + codeFingerprint();
  if (auto it = measured.find(key); it != measured.end()) {
    // Measured by an earlier engine of this process, maybe one without this directory.
    if (!cache.dir.empty() &&
        !(readStoredRow(cache.dir, key) == StoredRow{it->second.row->family, it->second.halfRate}))
      storeRow(cache.dir, key, it->second);
    return it->second;
  }
  if (!cache.dir.empty()) {
    const StoredRow row = readStoredRow(cache.dir, key);
    const codegen::MicroKernelShape* stored = codegen::findMicroKernel(row.family);
    if (stored && std::find(candidates.begin(), candidates.end(), stored) != candidates.end()) {
      choice.row = stored;
      choice.halfRate = row.halfRate;
      choice.how = "calibrated (cached)";
      return measured[key] = choice;
    }
  }
  auto start = Clock::now();
  std::vector<std::unique_ptr<JitEngine>> engines;
  for (const codegen::MicroKernelShape* row : candidates)
    engines.push_back(JitEngine::createFor(jtmb, KernelCacheOptions{}, row->family, "calibration"));
  choice.gflops = timeRows(engines);
  // A narrower row must still win after two more timings (each row's best of them all):
  // one busy moment on the core can slow the widest row's few calls past the margin, and
  // the row moves the last bits of every result (a suite run under load saw two
  // processes disagree).
  for (int again = 0; again < 2 && chooseCalibratedRow(choice.gflops) != 0; ++again) {
    const std::vector<std::pair<std::string, double>> more = timeRows(engines);
    for (size_t i = 0; i < more.size(); ++i) choice.gflops[i].second = std::max(choice.gflops[i].second, more[i].second);
  }
  const size_t kept = chooseCalibratedRow(choice.gflops);
  choice.row = candidates[kept];
  choice.halfRate = kept == 0 && measuresHalfRate(choice.gflops); // the widest row's rate
  choice.how = "calibrated";
  choice.millis = millisSince(start);
  if (!cache.dir.empty()) storeRow(cache.dir, key, choice);
  return measured[key] = choice;
}

std::unique_ptr<JitEngine> JitEngine::create(const JitTarget& target, const KernelCacheOptions& cache) {
  initialiseLLVMOnce();
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(llvm::sys::getProcessTriple())};
  jtmb.setCPU(target.cpu);
  llvm::SmallVector<llvm::StringRef, 16> features;
  llvm::StringRef(target.features).split(features, ',', -1, /*KeepEmpty=*/false);
  jtmb.addFeatures(std::vector<std::string>(features.begin(), features.end()));
  return createFor(std::move(jtmb), cache, target.row, target.row.empty() ? "target" : "target row", target.halfRate,
                   target.prefetchesStreamedWeights, /*measuresWeightPrefetch=*/false, target.digitProducts,
                   target.halfWeightPrefetchBytes, target.pairsOneRowPanels);
}

std::unique_ptr<JitEngine> JitEngine::createFor(llvm::orc::JITTargetMachineBuilder jtmb,
                                                const KernelCacheOptions& cache,
                                                const std::string& row, const std::string& how,
                                                bool halfRate, bool prefetchesStreamedWeights,
                                                bool measuresWeightPrefetch, bool digitProducts,
                                                int64_t halfWeightPrefetchBytes, bool pairsOneRowPanels) {
  auto impl = std::make_unique<Impl>();
  impl->measuresPrefetch = measuresWeightPrefetch;
  impl->cacheDir = cache.dir;
  if (!cache.dir.empty()) impl->disk = std::make_unique<DiskObjectCache>(cache.dir, cache.onWarning);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  jtmb.getOptions().EmitStackSizeSection = true; // what stackBytes() reads (StackSizes.h)
  impl->cpu = jtmb.getCPU();
  impl->rowChoice = how;
  {
    // The row follows what the CPU really has (its model's features included), and
    // kernels stay in the row's instruction set (CpuTable.h); the cache key follows.
    auto probe = unwrap(jtmb.createTargetMachine(), "creating target machine");
    auto cpuFeatures = codegen::CpuFeatures::parse(enabledFeatures(*probe));
    const codegen::MicroKernelShape* shape =
        row.empty() ? &codegen::selectMicroKernel(cpuFeatures) : codegen::findMicroKernel(row);
    if (!shape)
      throw std::runtime_error("no kernel row named '" + row + "' (avx512, avx2, avx, sse2)");
    if (!codegen::canExecute(cpuFeatures, *shape))
      throw std::runtime_error("CPU " + impl->cpu + " cannot execute the " + shape->family +
                               " kernel row's instructions");
    impl->shape = *shape;
    impl->shape.halfRate = halfRate;
    impl->shape.prefetchesStreamedWeights = prefetchesStreamedWeights;
    impl->shape.halfWeightPrefetchBytes = halfWeightPrefetchBytes;
    impl->shape.pairsOneRowPanels = pairsOneRowPanels;
    std::string off = codegen::kernelFeatureOverrides(cpuFeatures, *shape);
    llvm::SmallVector<llvm::StringRef, 4> offFeatures;
    llvm::StringRef(off).split(offFeatures, ',', -1, false);
    for (llvm::StringRef feature : offFeatures) jtmb.addFeatures({feature.str()});
    if ((cpuFeatures.amxBf16 || cpuFeatures.amxInt8) && !tileStatePermitted())
      jtmb.addFeatures({"-amx-tile", "-amx-bf16", "-amx-int8"});
  }
  impl->tm = unwrap(jtmb.createTargetMachine(), "creating target machine");
  impl->features = enabledFeatures(*impl->tm);
  impl->parsedFeatures = codegen::CpuFeatures::parse(impl->features);
  // Digit products for f32 × i8 / i4 wherever the row's vectors have vpdpbusd, and for
  // f32 × i4 where they multiply bytes in vpmaddubsw pairs (CpuTable.h).
  impl->shape.digitProducts = digitProducts && digitProductsAllowed() &&
                              codegen::missingDotInstructions(DType::I8, impl->parsedFeatures, impl->shape).empty();
  impl->shape.bytePairs = codegen::bytePairProducts(impl->parsedFeatures, impl->shape);
  impl->jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(jtmb);
  // The LLJIT only links: JitEngine compiles the objects itself (Impl::makeReady).
  impl->jit = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(),
                     "creating LLJIT");
  addPerfMapWriter(*impl->jit);
  Impl* raw = impl.get();

  // Helpers the kernels call (e.g. the erf GELU), then libm & co. from the process
  // for any libcall the backend emits (fmaf on a CPU without FMA, for instance).
  llvm::orc::JITDylib& dylib = raw->jit->getMainJITDylib();
  llvm::orc::SymbolMap helpers;
  for (const auto& h : codegen::runtimeHelperSymbols())
    helpers[raw->jit->mangleAndIntern(h.name)] = {
        llvm::orc::ExecutorAddr::fromPtr(h.address),
        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  check(dylib.define(llvm::orc::absoluteSymbols(std::move(helpers))), "defining helpers");
  dylib.addGenerator(unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                                raw->jit->getDataLayout().getGlobalPrefix()),
                            "opening the process's symbols"));
  return std::unique_ptr<JitEngine>(new JitEngine(std::move(impl)));
}

JitEngine::JitEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitEngine::~JitEngine() = default;

std::string JitEngine::cpuName() const { return impl_->cpu; }
std::string JitEngine::cpuFeatures() const { return impl_->features; }
const codegen::CpuFeatures& JitEngine::features() const { return impl_->parsedFeatures; }
const codegen::MicroKernelShape& JitEngine::microKernel() const { return impl_->shape; }
std::string JitEngine::rowChoice() const { return impl_->rowChoice; }
std::string WeightPrefetchChoice::describe() const {
  if (how.empty()) return "";
  std::string out = std::string("software prefetch ") + (prefetch ? "on" : "off");
  if (prefetch && bytes != codegen::kHalfWeightPrefetchBytes) out += ", " + std::to_string(bytes / 1024) + " KiB ahead";
  out += " (" + how;
  if (secondsWith > 0) {
    char times[128];
    if (secondsShort > 0)
      std::snprintf(times, sizeof times, " in %.0f ms: %.2f ms a call 1 KiB ahead, %.2f 4 KiB ahead, %.2f without",
                    millis, secondsShort * 1e3, secondsWith * 1e3, secondsWithout * 1e3);
    else
      std::snprintf(times, sizeof times, " in %.0f ms: %.2f ms a call with it, %.2f without", millis,
                    secondsWith * 1e3, secondsWithout * 1e3);
    out += times;
  }
  return out + ")";
}
std::string PanelPairingChoice::describe() const {
  if (how.empty()) return "";
  std::string out = std::string("one-row panels ") + (paired ? "paired" : "one at a time") + " (" + how;
  if (secondsPaired > 0) {
    char times[128];
    std::snprintf(times, sizeof times, " in %.0f ms: %.2f ms a call paired, %.2f one at a time", millis,
                  secondsPaired * 1e3, secondsSingle * 1e3);
    out += times;
  }
  return out + ")";
}

void JitEngine::deferWeightPrefetchChoice(bool defer) { impl_->deferChoice.store(defer); }

WeightPrefetchChoice JitEngine::weightPrefetch() const { return impl_->widened.published(); }
WeightPrefetchChoice JitEngine::dotWeightPrefetch() const { return impl_->dot.published(); }

PanelPairingChoice JitEngine::panelPairing() const {
  return impl_->pairingDecided.load(std::memory_order_acquire) ? impl_->pairing : PanelPairingChoice{};
}

std::string JitEngine::describeStreaming() const {
  const std::string dot = dotWeightPrefetch().describe();
  std::string out;
  for (const std::string& part : {weightPrefetch().describe(), dot.empty() ? dot : "dot kernels: " + dot,
                                  panelPairing().describe()})
    if (!part.empty()) out += (out.empty() ? "" : "; ") + part;
  return out;
}

namespace {
// The request for a spec; its factory holds a copy of the spec, so it outlives the caller's.
Request requestFor(const std::string& key, const codegen::KernelSpec& spec, const codegen::MicroKernelShape& shape,
                   const std::string& features) {
  codegen::KernelModule m = codegen::kernelModule(spec, shape, codegen::CpuFeatures::parse(features));
  return {key, std::move(m.functionName), std::move(m.build)};
}
} // namespace

void JitEngine::Impl::decideWeightPrefetch() {
  WeightPrefetchChoice& prefetch = widened.choice;
  if (!measuresPrefetch) {
    prefetch.prefetch = shape.prefetchesStreamedWeights;
    prefetch.bytes = shape.halfWeightPrefetchBytes;
    prefetch.how = "target";
  } else if (const std::optional<WeightPrefetchSetting> forced = forcedWeightPrefetch()) {
    prefetch.prefetch = forced->prefetch;
    prefetch.bytes = forced->bytes;
    prefetch.how = "NNC_PREFETCH_16BIT";
  } else {
    prefetch = hostWeightPrefetch(*jtmb, shape, cacheDir);
  }
  widened.shape = shape;
  widened.shape.prefetchesStreamedWeights = prefetch.prefetch;
  // Off, the distance names nothing: one key, as before the choice had a distance.
  widened.shape.halfWeightPrefetchBytes = prefetch.prefetch ? prefetch.bytes : codegen::kHalfWeightPrefetchBytes;
  widenedOwnDistance = widened.shape;
  widenedOwnDistance.halfWeightPrefetchBytes = codegen::kHalfWeightPrefetchBytes;
  widened.decided.store(true, std::memory_order_release);
}
void JitEngine::Impl::decideDotPrefetch() {
  WeightPrefetchChoice& prefetch = dot.choice;
  if (!measuresPrefetch) {
    prefetch.prefetch = shape.prefetchesStreamedWeights;
    prefetch.how = "target";
  } else if (const std::optional<bool> forced = environmentSwitch("NNC_PREFETCH_DOT")) {
    prefetch.prefetch = *forced;
    prefetch.how = "NNC_PREFETCH_DOT";
  } else {
    // Timed as the decode kernels will run: with the host's panel pairing where it applies.
    codegen::MicroKernelShape row = shape;
    if (codegen::followsPanelPairingChoice(dotPrefetchCalibrationSpec(codegen::hostCacheSizes()), shape)) {
      std::call_once(pairingOnce, [this] { decidePanelPairing(); });
      row.pairsOneRowPanels = pairing.paired;
    }
    prefetch = hostDotPrefetch(*jtmb, row, cacheDir);
  }
  dot.shape = shape; // the dot kernels' distances are their own
  dot.shape.prefetchesStreamedWeights = prefetch.prefetch;
  dot.decided.store(true, std::memory_order_release);
}
void JitEngine::Impl::decidePanelPairing() {
  if (!measuresPrefetch) {
    pairing.paired = shape.pairsOneRowPanels;
    pairing.how = "target";
  } else if (const std::optional<bool> forced = environmentSwitch("NNC_PAIRED_PANELS")) {
    pairing.paired = *forced;
    pairing.how = "NNC_PAIRED_PANELS";
  } else {
    pairing = hostPanelPairing(*jtmb, shape, cacheDir);
  }
  pairingDecided.store(true, std::memory_order_release);
}
Request JitEngine::Impl::requestOf(const codegen::KernelSpec& spec) {
  const codegen::MicroKernelShape row = shapeFor(spec);
  return requestFor(cacheKey(codegen::kernelKey(spec), row), spec, row, features);
}

namespace {
// A streaming choice measured once per process per key (the CPU, its features, the row
// and this build) and, with a kernel cache directory, stored there as `extension`'s one
// line: read back as "measured, cached", else measured (how "measured") and stored.
template <class Choice>
Choice measuredOncePerHost(const std::string& key, const std::string& dir, const std::string& extension,
                           const std::function<std::string(const Choice&)>& line,
                           const std::function<std::optional<Choice>(const std::string&)>& parse,
                           const std::function<Choice()>& measure) {
  static std::mutex mutex;
  static std::map<std::string, Choice> measured;
  std::lock_guard<std::mutex> lock(mutex);
  auto store = [&](const Choice& c) {
    if (!dir.empty() && readChoice(dir, key, extension, 1) != std::vector<std::string>{line(c)})
      storeChoice(dir, key, extension, {line(c)});
  };
  if (auto it = measured.find(key); it != measured.end()) {
    store(it->second);
    return it->second;
  }
  if (!dir.empty()) {
    const std::vector<std::string> lines = readChoice(dir, key, extension, 1);
    if (std::optional<Choice> cached = lines.empty() ? std::nullopt : parse(lines[0])) {
      cached->how = "measured, cached"; // printed in parentheses by describe()
      return measured[key] = *cached;
    }
  }
  auto start = Clock::now();
  Choice choice = measure();
  choice.how = "measured";
  choice.millis = millisSince(start);
  store(choice);
  return measured[key] = choice;
}
std::string streamingKey(const std::string& what, const llvm::orc::JITTargetMachineBuilder& jtmb,
                         const codegen::MicroKernelShape& row) {
  return what + "|" + jtmb.getCPU() + "|" + jtmb.getFeatures().getString() + "|" + row.family +
         (row.halfRate ? "|half-rate" : "") + "|" + codeFingerprint();
}
} // namespace

WeightPrefetchChoice JitEngine::Impl::hostWeightPrefetch(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                                         const codegen::MicroKernelShape& row,
                                                         const std::string& dir) {
  auto line = [](const WeightPrefetchChoice& c) { return weightPrefetchLine({c.prefetch, c.bytes}); };
  auto parse = [](const std::string& text) -> std::optional<WeightPrefetchChoice> {
    const std::optional<WeightPrefetchSetting> setting = parseWeightPrefetchLine(text);
    if (!setting) return std::nullopt;
    WeightPrefetchChoice c;
    c.prefetch = setting->prefetch;
    c.bytes = setting->bytes;
    return c;
  };
  auto measure = [&] {
    const codegen::GemmSpec spec = weightPrefetchCalibrationSpec(codegen::hostCacheSizes());
    // 4 KiB ahead, none, 1 KiB ahead.
    constexpr int64_t kAhead[3] = {codegen::kHalfWeightPrefetchBytes, 0, codegen::kShortHalfWeightPrefetchBytes};
    std::unique_ptr<JitEngine> engines[3];
    std::unique_ptr<Gemm> gemms[3];
    runEach(3, [&](size_t i) {
      engines[i] = createFor(jtmb, KernelCacheOptions{}, row.family, "calibration", row.halfRate,
                             /*prefetchesStreamedWeights=*/kAhead[i] > 0, /*measuresWeightPrefetch=*/false,
                             /*digitProducts=*/true, kAhead[i] > 0 ? kAhead[i] : codegen::kHalfWeightPrefetchBytes);
      gemms[i] = std::make_unique<Gemm>(*engines[i], spec);
    });
    const WeightPrefetchTimes times = timeWeightPrefetch(*gemms[0], *gemms[1], gemms[2].get());
    WeightPrefetchChoice c;
    c.prefetch = keepsWeightPrefetch(times);
    c.bytes = c.prefetch ? chosenWeightPrefetchBytes(times) : codegen::kHalfWeightPrefetchBytes;
    c.secondsWith = times.withPrefetch;
    c.secondsShort = times.withShortPrefetch;
    c.secondsWithout = times.withoutPrefetch;
    return c;
  };
  return measuredOncePerHost<WeightPrefetchChoice>(streamingKey("weight-prefetch", jtmb, row), dir, ".prefetch", line,
                                                   parse, measure);
}
std::vector<double> JitEngine::Impl::timeTwoWays(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                                 const codegen::MicroKernelShape& row, const codegen::GemmSpec& spec,
                                                 std::array<bool, 2> prefetches, std::array<bool, 2> pairs) {
  std::unique_ptr<JitEngine> engines[2];
  std::unique_ptr<Gemm> gemms[2];
  runEach(2, [&](size_t i) {
    engines[i] = createFor(jtmb, KernelCacheOptions{}, row.family, "calibration", row.halfRate, prefetches[i],
                           /*measuresWeightPrefetch=*/false, /*digitProducts=*/true, codegen::kHalfWeightPrefetchBytes,
                           pairs[i]);
    gemms[i] = std::make_unique<Gemm>(*engines[i], spec);
  });
  return timeStreamedGemms({gemms[0].get(), gemms[1].get()});
}
WeightPrefetchChoice JitEngine::Impl::hostDotPrefetch(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                                      const codegen::MicroKernelShape& row, const std::string& dir) {
  auto line = [](const WeightPrefetchChoice& c) { return weightPrefetchLine({c.prefetch}); };
  auto parse = [](const std::string& text) -> std::optional<WeightPrefetchChoice> {
    const std::optional<WeightPrefetchSetting> setting = parseWeightPrefetchLine(text);
    if (!setting) return std::nullopt;
    WeightPrefetchChoice c;
    c.prefetch = setting->prefetch;
    return c;
  };
  auto measure = [&] {
    const std::vector<double> seconds = timeTwoWays(jtmb, row, dotPrefetchCalibrationSpec(codegen::hostCacheSizes()),
                                                    /*prefetches=*/{true, false},
                                                    /*pairs=*/{row.pairsOneRowPanels, row.pairsOneRowPanels});
    WeightPrefetchChoice c;
    c.prefetch = keepsDotWeightPrefetch(seconds[0], seconds[1]);
    c.secondsWith = seconds[0];
    c.secondsWithout = seconds[1];
    return c;
  };
  // The pairing it was timed with names the key too (NNC_PAIRED_PANELS may force the other).
  const std::string what = std::string("dot-weight-prefetch") + (row.pairsOneRowPanels ? "" : "|single-panels");
  return measuredOncePerHost<WeightPrefetchChoice>(streamingKey(what, jtmb, row), dir, ".dot-prefetch", line, parse,
                                                   measure);
}
PanelPairingChoice JitEngine::Impl::hostPanelPairing(const llvm::orc::JITTargetMachineBuilder& jtmb,
                                                     const codegen::MicroKernelShape& row, const std::string& dir) {
  auto line = [](const PanelPairingChoice& c) { return panelPairingLine(c.paired); };
  auto parse = [](const std::string& text) -> std::optional<PanelPairingChoice> {
    const std::optional<bool> paired = parsePanelPairingLine(text);
    if (!paired) return std::nullopt;
    PanelPairingChoice c;
    c.paired = *paired;
    return c;
  };
  auto measure = [&] {
    const std::vector<double> seconds = timeTwoWays(jtmb, row, panelPairingCalibrationSpec(codegen::hostCacheSizes()),
                                                    /*prefetches=*/{true, true}, /*pairs=*/{true, false});
    PanelPairingChoice c;
    c.paired = keepsPanelPairs(seconds[0], seconds[1]);
    c.secondsPaired = seconds[0];
    c.secondsSingle = seconds[1];
    return c;
  };
  return measuredOncePerHost<PanelPairingChoice>(streamingKey("panel-pairing", jtmb, row), dir, ".pairing", line,
                                                 parse, measure);
}

void* JitEngine::kernel(const codegen::KernelSpec& spec) {
  return impl_->ready(impl_->requestOf(spec)).address;
}

size_t JitEngine::stackBytes(const codegen::KernelSpec& spec) {
  return impl_->ready(impl_->requestOf(spec)).stackBytes;
}

void JitEngine::prepare(const std::vector<codegen::KernelSpec>& specs) {
  std::vector<Request> requests;
  for (const auto& spec : specs)
    requests.push_back(impl_->requestOf(spec));
  impl_->makeReady(requests);
}

std::string JitEngine::emit(const codegen::KernelSpec& spec, EmitForm form) {
  return impl_->print(codegen::kernelModule(spec, impl_->shapeFor(spec), impl_->parsedFeatures).build,
                      form == EmitForm::Assembly);
}

size_t JitEngine::kernelsCompiled() const {
  std::lock_guard<std::mutex> lock(impl_->cacheMutex);
  return impl_->kernels.size();
}
size_t JitEngine::kernelsFromCache() const {
  std::lock_guard<std::mutex> lock(impl_->cacheMutex);
  return impl_->stats.fromCache;
}
double JitEngine::compileMillis() const {
  std::lock_guard<std::mutex> lock(impl_->cacheMutex);
  return impl_->stats.totalMillis;
}
CompileStats JitEngine::compileStats() const {
  std::lock_guard<std::mutex> lock(impl_->cacheMutex);
  return impl_->stats;
}
std::string JitEngine::cacheDir() const { return impl_->disk ? impl_->disk->dir() : std::string(); }

} // namespace nnc::runtime
