// LLJIT set-up, the O3 pipeline, the kernel cache and the IR/assembly printers.
#include "runtime/jit/JitEngine.h"

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

  mutable std::mutex cacheMutex; // held while a kernel compiles: each key compiles once
  std::unordered_map<std::string, void*> kernels;
  double compileMillis = 0;

  std::string cacheKey(const std::string& specKey) const {
    return specKey + "|" + cpu + "|" + features;
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
    auto start = std::chrono::steady_clock::now();
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> m = build(*ctx);
    prepare(*m);
    check(jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))),
          "adding kernel module");
    void* address = unwrap(jit->lookup(symbol), "compiling kernel").toPtr<void*>();
    compileMillis +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
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

std::unique_ptr<JitEngine> JitEngine::create() {
  initialiseLLVMOnce();
  return createFor(unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting host CPU"));
}

std::unique_ptr<JitEngine> JitEngine::create(const JitTarget& target) {
  initialiseLLVMOnce();
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(llvm::sys::getProcessTriple())};
  jtmb.setCPU(target.cpu);
  llvm::SmallVector<llvm::StringRef, 16> features;
  llvm::StringRef(target.features).split(features, ',', -1, /*KeepEmpty=*/false);
  jtmb.addFeatures(std::vector<std::string>(features.begin(), features.end()));
  return createFor(std::move(jtmb));
}

std::unique_ptr<JitEngine> JitEngine::createFor(llvm::orc::JITTargetMachineBuilder jtmb) {
  auto impl = std::make_unique<Impl>();
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  impl->cpu = jtmb.getCPU();
  impl->features = enabledFeatures(jtmb.getFeatures());
  impl->shape = &codegen::selectMicroKernel(codegen::CpuFeatures::parse(impl->features));
  impl->tm = unwrap(jtmb.createTargetMachine(), "creating target machine");
  impl->jit = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(),
                     "creating LLJIT");

  Impl* raw = impl.get();
  raw->jit->getIRTransformLayer().setTransform(
      [raw](llvm::orc::ThreadSafeModule tsm, const llvm::orc::MaterializationResponsibility&)
          -> llvm::Expected<llvm::orc::ThreadSafeModule> {
        std::lock_guard<std::mutex> lock(raw->tmMutex);
        tsm.withModuleDo([&](llvm::Module& m) { runO3(m, *raw->tm); });
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
double JitEngine::compileMillis() const {
  std::lock_guard<std::mutex> lock(impl_->cacheMutex);
  return impl_->compileMillis;
}

} // namespace nnc::runtime
