// LLJIT set-up, the O3 pipeline, the kernel caches (in memory and on disk) and the
// IR/assembly printers.
#include "runtime/jit/JitEngine.h"

#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "compiler/codegen/ElementwiseEmitter.h"
#include "compiler/codegen/GemmEmitter.h"
#include "compiler/codegen/VectorMath.h"
#include "runtime/jit/CodeFingerprint.h"
#include "runtime/jit/ObjectCache.h"

namespace nnc::runtime {

namespace {

using ModuleFactory = std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)>;

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

void runO3(llvm::Module& m, llvm::TargetMachine& tm) {
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
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

using Clock = std::chrono::steady_clock;
double millisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The LLJIT's compile function: LLVM's SimpleCompiler (which asks the object cache
// first and hands it every object it compiles), timed.
class TimedCompiler : public llvm::orc::IRCompileLayer::IRCompiler {
public:
  TimedCompiler(std::unique_ptr<llvm::TargetMachine> tm, llvm::ObjectCache* cache, double* millis)
      : IRCompiler(llvm::orc::irManglingOptionsFromTargetOptions(tm->Options)), tm_(std::move(tm)),
        compiler_(*tm_, cache), millis_(millis) {}
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> operator()(llvm::Module& m) override {
    auto start = Clock::now();
    auto object = compiler_(m);
    *millis_ += millisSince(start);
    return object;
  }

private:
  std::unique_ptr<llvm::TargetMachine> tm_;
  llvm::orc::SimpleCompiler compiler_;
  double* millis_;
};

std::string enabledFeatures(const llvm::SubtargetFeatures& features) {
  std::string out;
  for (const std::string& f : features.getFeatures())
    if (!f.empty() && f[0] == '+') out += (out.empty() ? "" : ",") + f;
  return out;
}

} // namespace

struct JitEngine::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm; // for the O3 pipeline and for emitAsm
  std::mutex tmMutex;
  std::string cpu, features;
  const codegen::MicroKernelShape* shape = nullptr;

  std::unique_ptr<DiskObjectCache> disk; // null: no disk cache

  // Held while a kernel compiles: each key compiles once. The stats are written under
  // it too (the compile function runs inside jit->lookup, on the thread that holds it).
  mutable std::mutex cacheMutex;
  std::unordered_map<std::string, void*> kernels;
  CompileStats stats;

  std::string cacheKey(const std::string& specKey) const {
    return specKey + "|" + cpu + "|" + features;
  }
  // The disk cache's key: also what built the code, so no other build reuses it.
  std::string diskKey(const std::string& key) const { return key + "|" + codeFingerprint(); }

  // The kernel from the disk cache, linked; null when there is none or it does not
  // link (its symbols are then removed again, so the kernel can be compiled instead).
  void* loadCached(const std::string& key, const std::string& symbol) {
    std::unique_ptr<llvm::MemoryBuffer> object = disk->load(diskKey(key));
    if (!object) return nullptr;
    llvm::orc::ResourceTrackerSP tracker = jit->getMainJITDylib().createResourceTracker();
    llvm::Expected<llvm::orc::ExecutorAddr> address = [&]() -> llvm::Expected<llvm::orc::ExecutorAddr> {
      if (llvm::Error err = jit->addObjectFile(tracker, std::move(object))) return err;
      return jit->lookup(symbol);
    }();
    if (address) return address->toPtr<void*>();
    llvm::consumeError(address.takeError());
    llvm::consumeError(tracker->remove());
    return nullptr;
  }

  // Target triple, data layout and per-function CPU attributes; then the verifier.
  void prepare(llvm::Module& m) {
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

  void* compile(const std::string& specKey, const std::string& symbol, const ModuleFactory& build) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    std::string key = cacheKey(specKey);
    if (auto it = kernels.find(key); it != kernels.end()) return it->second;
    auto start = Clock::now();
    // The disk cache first, by key: a hit builds no IR at all.
    if (disk)
      if (void* address = loadCached(key, symbol)) {
        double ms = millisSince(start);
        stats.loadMillis += ms;
        stats.totalMillis += ms;
        ++stats.fromCache;
        kernels.emplace(key, address);
        return address;
      }
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> m = build(*ctx);
    prepare(*m);
    // The module's name is the disk key: the compile function's ObjectCache stores by it.
    m->setModuleIdentifier(diskKey(key));
    stats.emitMillis += millisSince(start);
    check(jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))),
          "adding kernel module");
    void* address = unwrap(jit->lookup(symbol), "compiling kernel").toPtr<void*>();
    stats.totalMillis += millisSince(start);
    ++stats.compiled;
    kernels.emplace(key, address);
    return address;
  }

  std::string print(const ModuleFactory& build, bool assembly) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = build(ctx);
    prepare(*m);
    std::lock_guard<std::mutex> lock(tmMutex);
    runO3(*m, *tm);
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
  return createFor(unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting host CPU"),
                   cache);
}

std::unique_ptr<JitEngine> JitEngine::create(const JitTarget& target, const KernelCacheOptions& cache) {
  initialiseLLVMOnce();
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(llvm::sys::getProcessTriple())};
  jtmb.setCPU(target.cpu);
  llvm::SmallVector<llvm::StringRef, 16> features;
  llvm::StringRef(target.features).split(features, ',', -1, /*KeepEmpty=*/false);
  jtmb.addFeatures(std::vector<std::string>(features.begin(), features.end()));
  return createFor(std::move(jtmb), cache);
}

std::unique_ptr<JitEngine> JitEngine::createFor(llvm::orc::JITTargetMachineBuilder jtmb,
                                                const KernelCacheOptions& cache) {
  auto impl = std::make_unique<Impl>();
  if (!cache.dir.empty()) impl->disk = std::make_unique<DiskObjectCache>(cache.dir);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  impl->cpu = jtmb.getCPU();
  impl->features = enabledFeatures(jtmb.getFeatures());
  impl->shape = &codegen::selectMicroKernel(codegen::CpuFeatures::parse(impl->features));
  impl->tm = unwrap(jtmb.createTargetMachine(), "creating target machine");
  Impl* raw = impl.get();
  impl->jit = unwrap(
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(jtmb)
          .setCompileFunctionCreator([raw](llvm::orc::JITTargetMachineBuilder builder)
                                         -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
            auto tm = builder.createTargetMachine();
            if (!tm) return tm.takeError();
            return std::make_unique<TimedCompiler>(std::move(*tm), raw->disk.get(),
                                                   &raw->stats.codegenMillis);
          })
          .create(),
      "creating LLJIT");

  raw->jit->getIRTransformLayer().setTransform(
      [raw](llvm::orc::ThreadSafeModule tsm, const llvm::orc::MaterializationResponsibility&)
          -> llvm::Expected<llvm::orc::ThreadSafeModule> {
        std::lock_guard<std::mutex> lock(raw->tmMutex);
        auto start = Clock::now();
        tsm.withModuleDo([&](llvm::Module& m) { runO3(m, *raw->tm); });
        raw->stats.optimiseMillis += millisSince(start);
        return tsm;
      });

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
const codegen::MicroKernelShape& JitEngine::microKernel() const { return *impl_->shape; }

void* JitEngine::gemm(const codegen::GemmSpec& spec) {
  codegen::validateGemmSpec(spec);
  const auto& shape = *impl_->shape;
  return impl_->compile(spec.key(), codegen::gemmFunctionName(spec), [&](llvm::LLVMContext& c) {
    return codegen::emitGemmModule(c, spec, shape);
  });
}

void* JitEngine::elementwise(const codegen::ElementwiseSpec& spec) {
  codegen::validateElementwiseSpec(spec);
  const auto& shape = *impl_->shape;
  return impl_->compile(spec.key(), codegen::elementwiseFunctionName(spec),
                        [&](llvm::LLVMContext& c) {
                          return codegen::emitElementwiseModule(c, spec, shape);
                        });
}

std::string JitEngine::emitLLVM(const codegen::GemmSpec& spec) {
  return impl_->print([&](llvm::LLVMContext& c) { return codegen::emitGemmModule(c, spec, *impl_->shape); }, false);
}
std::string JitEngine::emitAsm(const codegen::GemmSpec& spec) {
  return impl_->print([&](llvm::LLVMContext& c) { return codegen::emitGemmModule(c, spec, *impl_->shape); }, true);
}
std::string JitEngine::emitLLVM(const codegen::ElementwiseSpec& spec) {
  return impl_->print([&](llvm::LLVMContext& c) { return codegen::emitElementwiseModule(c, spec, *impl_->shape); }, false);
}
std::string JitEngine::emitAsm(const codegen::ElementwiseSpec& spec) {
  return impl_->print([&](llvm::LLVMContext& c) { return codegen::emitElementwiseModule(c, spec, *impl_->shape); }, true);
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
