// The public API (include/nnc/nnc.h) over the compiler driver (compiler/driver) and the
// runtime: a Model is an analysed model, its JIT engine and its compiled kernels, and
// a pool of per-call workspaces so that run() can be called from many threads.
#include "nnc/nnc.h"

#include <fmt/format.h>

#include <filesystem>
#include <mutex>
#include <shared_mutex>

#include "api/Internal.h"
#include "compiler/driver/Driver.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/io/WeightMap.h"
#include "runtime/model/CompiledModel.h"
#include "runtime/model/MemoryBill.h"
#include "runtime/model/WeightStore.h"

namespace nnc {

Error::Error(const std::string &message, std::vector<Diagnostic> diagnostics)
    : std::runtime_error(message), diagnostics_(std::move(diagnostics)) {}

using namespace internal;

WeightMap::WeightMap() : impl_(std::make_shared<const Impl>()) {}

WeightMap WeightMap::fromFile(const std::string &path) {
  return translated([&] {
    WeightMap m;
    m.impl_ = std::make_shared<const Impl>(Impl{runtime::WeightMap::fromFile(path)});
    return m;
  });
}

WeightMap WeightMap::fromText(const std::string &text, const std::string &name) {
  return translated([&] {
    WeightMap m;
    m.impl_ = std::make_shared<const Impl>(Impl{runtime::WeightMap::parse(text, name)});
    return m;
  });
}

std::string WeightMap::apply(const std::string &tensorName) const {
  return translated([&] { return impl_->map.apply(tensorName); });
}

size_t WeightMap::size() const { return impl_->map.rules().size(); }

struct Model::Impl {
  std::string file;
  Options options;
  driver::AnalyzedModel analyzed;
  std::unique_ptr<runtime::JitEngine> jit;
  std::unique_ptr<runtime::CompiledModel> compiled; // null when a layer cannot run yet
  std::string whyNotRunnable;
  bool weightsLoaded = false;
  // run() holds it shared for the whole run, setWeights exclusive: a run sees the old
  // weights or the new ones, never a mix (docs/api.md, threads).
  mutable std::shared_mutex weightsLock;
  mutable std::mutex workspacesMutex;
  mutable std::vector<std::unique_ptr<runtime::CompiledModel::Workspace>> workspaces; // free ones

  static std::unique_ptr<Impl> compile(driver::Compiler compiler, const Options &o) {
    auto impl = std::make_unique<Impl>();
    impl->file = compiler.source().path();
    impl->options = o;
    impl->analyzed = compiler.analyze(compileOptions(o));
    impl->jit = runtime::JitEngine::create(kernelCache(o));
    try {
      impl->compiled = driver::compileModel(impl->analyzed, *impl->jit, threadsOf(o), denormalsOf(o));
    } catch (const UserError &e) {
      impl->whyNotRunnable = e.what(); // the report still works; run() says why not
    }
    return impl;
  }

  runtime::CompiledModel &runnable() const {
    if (!compiled) throw Error(whyNotRunnable);
    return *compiled;
  }
  runtime::MemoryBill bill(int64_t weightsFileBytes) const {
    const ir::TensorType &in = analyzed.program.inputType;
    return runtime::memoryBill(analyzed.program, jit->microKernel(), weightsFileBytes, in.elements() * 4);
  }
  // Before loadWeights/randomWeights allocate: a layer that cannot run is said first
  // (docs/api.md), then the bill is checked against Options::maxMemory.
  void checkMemory(int64_t weightsFileBytes) const {
    runnable();
    checkMemoryLimit(options, analyzed.program, bill(weightsFileBytes));
  }
  void loadFile(const std::string &path, const runtime::WeightMap &map) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    checkMemory(ec ? 0 : int64_t(size)); // a file it cannot size: open() says why
    const lower::KernelProgram &program = runnable().program();
    setWeights(runtime::WeightStore::fromSafeTensors(program.tensors, path, analyzed.graph.modelName, map,
                                                     program.tiedTensors));
  }
  void loadBytes(const void *bytes, size_t size, const runtime::WeightMap &map) {
    checkWeightBytes("Model", bytes, size);
    checkMemory(int64_t(size)); // they are copied
    const auto *p = static_cast<const uint8_t *>(bytes);
    SafeTensorsFile file = SafeTensorsFile::fromBytes("<weights in memory>", std::vector<uint8_t>(p, p + size));
    const lower::KernelProgram &program = runnable().program();
    setWeights(runtime::WeightStore::fromSafeTensors(program.tensors, file, analyzed.graph.modelName, map,
                                                     program.tiedTensors));
  }
  void setWeights(runtime::WeightStore w) {
    std::unique_lock<std::shared_mutex> exclusive(weightsLock); // after the runs in progress
    if (options.weightsWhileRunning)
      runnable().setWeightsWhileRunning(std::make_shared<const runtime::WeightStore>(std::move(w)));
    else
      runnable().setWeights(w);
    weightsLoaded = true;
  }
  void run(const float *in, float *out) const {
    runtime::CompiledModel &m = runnable();
    std::shared_lock<std::shared_mutex> shared(weightsLock);
    if (!weightsLoaded) throw Error("Model::run before the weights were loaded (loadWeights or randomWeights)");
    std::unique_ptr<runtime::CompiledModel::Workspace> ws;
    {
      std::lock_guard<std::mutex> lock(workspacesMutex);
      if (!workspaces.empty()) {
        ws = std::move(workspaces.back());
        workspaces.pop_back();
      }
    }
    if (!ws) ws = m.newWorkspace();
    m.run(in, out, *ws);
    std::lock_guard<std::mutex> lock(workspacesMutex);
    workspaces.push_back(std::move(ws));
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

Model Model::fromFile(const std::string &path, const Options &options) {
  return translated(
      [&] { return Model(Impl::compile(driver::Compiler::fromFile(path, programWarnings(options)), options)); }, path);
}

Model Model::fromSource(const std::string &text, const Options &options) {
  return translated(
      [&] {
        return Model(Impl::compile(driver::Compiler::fromSource("<source>", text, programWarnings(options)), options));
      },
      "<source>");
}

void Model::loadWeights(const std::string &path) {
  translated([&] { live(impl_, "Model")->loadFile(path, {}); });
}

void Model::loadWeights(const void *bytes, size_t size) {
  translated([&] { live(impl_, "Model")->loadBytes(bytes, size, {}); });
}

void Model::loadWeights(const std::string &path, const WeightMap &map) {
  translated([&] { live(impl_, "Model")->loadFile(path, map.impl_->map); });
}

void Model::loadWeights(const void *bytes, size_t size, const WeightMap &map) {
  translated([&] { live(impl_, "Model")->loadBytes(bytes, size, map.impl_->map); });
}

void Model::randomWeights(uint64_t seed) {
  translated([&] {
    Impl &impl = *live(impl_, "Model");
    impl.checkMemory(0);
    impl.setWeights(runtime::WeightStore::random(impl.runnable().program().tensors, seed));
  });
}

MemoryBill Model::memoryBill() const {
  return translated([&] {
    runtime::MemoryBill b = live(impl_, "Model")->bill(0);
    MemoryBill out;
    for (const auto &p : b.parts) out.parts.push_back({p.what, p.bytes});
    out.total = b.total;
    out.largestLayer = b.largestLayer;
    out.largestLayerBytes = b.largestLayerBytes;
    out.largestLayerWhere = b.largestLayerWhere;
    return out;
  });
}

std::vector<int64_t> Model::inputShape() const { return live(impl_, "Model")->analyzed.program.inputType.shape; }
std::vector<int64_t> Model::outputShape() const { return live(impl_, "Model")->analyzed.program.outputType.shape; }
int64_t Model::inputElements() const { return live(impl_, "Model")->analyzed.program.inputType.elements(); }
int64_t Model::outputElements() const { return live(impl_, "Model")->analyzed.program.outputType.elements(); }
bool Model::tokenInput() const { return live(impl_, "Model")->analyzed.program.inputType.dtype == DType::I32; }

size_t Model::runStackBytes() const {
  return translated([&] { return live(impl_, "Model")->runnable().runStackBytes(); });
}

void Model::run(const float *in, float *out) const {
  if (tokenInput()) throw Error("Model::run: this model's input is token ids: pass const int32_t*");
  if (!in || !out) throw Error("Model::run: the input or the output is a null pointer");
  translated([&] { impl_->run(in, out); }); // live: tokenInput() checked it
}

void Model::run(const int32_t *tokens, float *out) const {
  if (!tokenInput()) throw Error("Model::run: this model's input is f32 data: pass const float*");
  if (!tokens || !out) throw Error("Model::run: the token ids or the output is a null pointer");
  translated([&] { // live: tokenInput() checked it
    impl_->runnable(); // a layer that cannot run yet (attention): this says which
    impl_->run(reinterpret_cast<const float *>(tokens), out);
  });
}

Report Model::report() const {
  const driver::AnalyzedModel &m = live(impl_, "Model")->analyzed;
  const passes::Totals &t = m.analysis.totals;
  Report r;
  r.model = m.graph.modelName;
  r.batch = m.graph.batch;
  r.params = t.params;
  r.weights = t.weights;
  r.macs = t.macs;
  r.flops = 2 * t.macs;
  r.weight_bytes_stored = t.weightBytesStored;
  r.activation_peak_bytes = m.analysis.memory.activationPeakBytes;
  r.runtime_arena_bytes = m.program.arenaBytes();
  for (size_t i = 1; i < m.graph.ops.size(); ++i) {
    const ir::Op &op = m.graph.ops[i];
    if (!op.isLayer) continue;
    const passes::OpCosts &c = m.analysis.ops[i];
    r.layers.push_back({op.name, ir::opKindName(op.kind), op.type.shape, c.params, c.macs});
  }
  return r;
}

} // namespace nnc
