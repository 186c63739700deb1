#include "runtime/model/CompiledModel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/EnvironmentSwitch.h"
#include "runtime/KernelStack.h"
#include "runtime/LargeAllocation.h"
#include "runtime/jit/CodeFingerprint.h"
#include "runtime/model/WeightCache.h"
#include "runtime/model/WeightRecipes.h"

namespace nnc::runtime {
using lower::Operand;

struct CompiledModel::Constant {
  PackedWeights packed;      // recipes packed for a GEMM
  std::vector<float> values; // the others
  // Or the others' values mapped from a weight cache entry, or a table's bytes in packed
  // memory (buildConstant): memory that `entry` keeps.
  llvm::ArrayRef<float> mapped;
  std::shared_ptr<const void> entry;
  llvm::ArrayRef<float> plain() const { return mapped.data() ? mapped : llvm::ArrayRef<float>(values); }
  const void *pointer() const { return packed.data() ? static_cast<const void *>(&packed) : plain().data(); }
  // The bytes the kernels read: what a weight cache entry holds for it.
  llvm::ArrayRef<uint8_t> bytes() const {
    if (packed.data()) return {reinterpret_cast<const uint8_t *>(packed.data()), size_t(packed.bytes())};
    return {reinterpret_cast<const uint8_t *>(plain().data()), plain().size() * sizeof(float)};
  }
};

struct CompiledModel::ConstantPlan {
  std::vector<const Gemm *> gemmOf; // the GEMM each packed constant is laid out for
  std::vector<std::shared_ptr<const Constant>> built; // shared or mapped from the cache; null: to make
  std::vector<size_t> toMake; // the constants a weight cache entry holds, in its order
  std::optional<WeightCache> cache; // when the made constants are to be stored there
  std::string cacheKey;
  std::vector<int64_t> cachedBytes; // of toMake's constants
};

struct CompiledModel::Background {
  const CompiledModel *model = nullptr;
  std::vector<std::shared_ptr<const Constant>> *constants = nullptr; // the model's, filled in under `mutex`
  ConstantPlan plan;
  std::vector<size_t> order;   // the constants to make, in the order the steps first read them
  std::atomic<size_t> next{0}; // order's first unclaimed entry
  std::shared_ptr<const WeightStore> weights; // released once every constant is made
  std::mutex mutex;
  std::condition_variable made; // a constant was made (or failed), or all were
  std::vector<char> done;       // per constant: made or failed (mutex)
  std::vector<std::exception_ptr> errors; // per constant, then storing them in the weight cache
  size_t left = 0;              // constants of the order not yet done (mutex)
  std::chrono::steady_clock::time_point start, lastMade; // setWeightsWhileRunning's call; left reached 0
  bool finished = false;        // every constant done, the weight cache stored (mutex)
  std::atomic<bool> allMade{false}; // finished, and no constant failed: run() need not wait
  std::thread builders;         // joined by a later setWeights and the destructor

  // Claims the next constant of the order and makes it: the builders, and a run that
  // waits for one (so a step waiting for its weights makes the next ones meanwhile).
  // False when none is left to claim.
  bool buildNext() {
    const size_t i = next.fetch_add(1);
    if (i >= order.size()) return false;
    const size_t id = order[i];
    std::shared_ptr<const Constant> c;
    std::exception_ptr error;
    try {
      c = model->buildConstant(id, *weights, plan);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (c) (*constants)[id] = std::move(c);
    errors[id] = error;
    done[id] = 1;
    if (--left == 0) lastMade = std::chrono::steady_clock::now();
    made.notify_all();
    return true;
  }
};

void CompiledModel::requireRunnable(const lower::KernelProgram &program) {
  if (const lower::Step *s = program.firstNotRunnable())
    throw UserError(fmt::format("layer '{}' ({}, line {}) {}", s->layer, s->opKind, s->line, s->whyNotRunnable),
                    s->blocker == lower::Step::Blocker::StorageDType ? UserError::Topic::StorageDType
                                                                     : UserError::Topic::General);
}

CompiledModel::CompiledModel(lower::KernelProgram program, JitEngine &jit, int threads, Denormals denormals)
    : program_(std::move(program)), denormals_(denormals), kernelCacheDir_(jit.cacheDir()) {
  auto start = std::chrono::steady_clock::now();
  requireRunnable(program_);
  if (program_.outputType.dtype != DType::F32) // views pass the input's ids on: nothing computes from them
    throw UserError(fmt::format("model '{}': its output '{}' is {}, the input's token ids passed on unchanged; a run "
                                "computes f32 values (end the model with a layer that computes from the ids, such as "
                                "embedding)",
                                program_.model, program_.buffers[size_t(program_.output)].name,
                                program_.outputType.str()));
  if (const DType mode = program_.quant.activations; mode != DType::F32) {
    const std::string missing =
        codegen::missingDotInstructions(mode, jit.features(), jit.microKernel());
    if (!missing.empty() && jit.rowChoice() == "NNC_ISA") // the CPU may have them: the forced row does not use them
      throw UserError(fmt::format("{} activations need {}; NNC_ISA forces the kernel row {}, which has none (this "
                                  "CPU: {}; unset NNC_ISA, or force a row that has them)",
                                  dtypeName(mode), missing, jit.microKernel().family, jit.cpuName()));
    if (!missing.empty())
      throw UserError(fmt::format("{} activations need {}, which this CPU ({}, kernel row {}) does not offer", dtypeName(mode),
                                  missing, jit.cpuName(), jit.microKernel().family));
  }
  // All kernels first, so the JIT compiles the missing ones side by side.
  const std::vector<codegen::KernelSpec> specs = kernels();
  jit.prepare(specs);
  size_t deepest = 0;
  for (const auto &spec : specs) deepest = std::max(deepest, jit.stackBytes(spec));
  runStackBytes_ = deepest + kRunFrameBytes;
  pool_ = std::make_unique<ThreadPool>(threads, runStackBytes_);
  for (const auto &s : program_.steps) steps_.push_back(makeStepKernel(jit, *s.kernel));
  compileMillis_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

CompiledModel::~CompiledModel() { joinBuilders(); }

void CompiledModel::joinBuilders() {
  if (background_) background_->builders.join();
  background_.reset();
}

std::unique_ptr<CompiledModel::Workspace> CompiledModel::newWorkspace() const {
  const size_t bytes = size_t(std::max<int64_t>(program_.arenaFloats, 16)) * sizeof(float);
  void *mem = allocateLargeZeroed(bytes, 64);
  if (!mem)
    throw UserError(fmt::format("model '{}' at batch {} needs {} bytes of activation memory ({:.2f} GiB) and this "
                                "machine could not allocate them",
                                program_.model, program_.batch, withCommas(int64_t(bytes)),
                                double(bytes) / double(1LL << 30)),
                    UserError::Topic::ActivationMemory);
  auto ws = std::make_unique<Workspace>();
  ws->arena_.reset(static_cast<float *>(mem));
  return ws;
}

std::vector<codegen::KernelSpec> CompiledModel::kernels() const {
  std::vector<codegen::KernelSpec> out;
  std::vector<std::string> keys;
  for (const auto &s : program_.steps) {
    if (!s.kernel) continue;
    for (const codegen::KernelSpec &part : codegen::compiledParts(*s.kernel)) {
      std::string key = codegen::kernelKey(part);
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      keys.push_back(key);
      out.push_back(part);
    }
  }
  return out;
}

namespace {
// The rows of a recipe that are stored rows as they are (one tensor, or tensors one after
// another: attention's q, k, v, a gated MLP's gate and up), pointing into the store, so
// that they are packed from there without copying GBs into fresh memory first; empty
// for any other recipe. A GEMM reads its [N, K] weight as N rows of K; a table as
// storedTableLayout does (a vector is one row).
std::vector<const float *> storedRows(const lower::WeightRecipe &recipe, const WeightStore &weights, bool gemm) {
  using Source = lower::WeightRecipe::Source;
  if ((recipe.source != Source::Tensor && recipe.source != Source::Concat) || recipe.kernelTaps > 1 ||
      recipe.transposed || recipe.shape.empty() || recipe.shape[0] < 1)
    return {};
  int64_t count = 1;
  for (int64_t d : recipe.shape) count *= d;
  const int64_t rowCount = gemm || recipe.shape.size() > 1 ? recipe.shape[0] : 1;
  const int64_t K = count / rowCount, first = recipe.rowBegin * (count / recipe.shape[0]); // in elements, as makeConstant
  if (K < 1 || rowCount * K != count) return {};
  std::vector<const float *> rows;
  for (const std::string &t : recipe.tensors) {
    const auto &v = weights.get(t).values();
    if (int64_t(v.size()) % K != 0) return {};
    for (size_t at = 0; at < v.size(); at += size_t(K)) rows.push_back(v.data() + at);
    if (recipe.source == Source::Tensor) break;
  }
  if (first % K != 0 || int64_t(rows.size()) < first / K + rowCount) return {}; // makeConstant says why
  return std::vector<const float *>(rows.begin() + first / K, rows.begin() + first / K + rowCount);
}
// Whether rows of K floats each lie one after another (one span of the mapped file).
bool contiguous(const std::vector<const float *> &rows, int64_t K) {
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i] != rows[i - 1] + K) return false;
  return true;
}
// A plain constant stored below f32: [rows, cols] (a vector: one row) in rowTableLayout.
codegen::PanelLayout storedTableLayout(const lower::WeightRecipe &recipe, int64_t group) {
  const int64_t rows = recipe.shape.size() > 1 ? recipe.shape[0] : 1;
  return codegen::rowTableLayout(rows, recipe.shape.back(), recipe.storage, group);
}
// Everything that decides a constant's bytes besides the weights and the code, for the
// weight cache's key (WeightCache.h).
std::string recipeKey(const lower::WeightRecipe &r, const codegen::PanelLayout *packed) {
  std::string key = fmt::format("{} source {} tensors {} shape {} rows {} taps {} transposed {} eps {:a} theta {:a} {}",
                                r.name, int(r.source), fmt::join(r.tensors, ","), fmt::join(r.shape, "x"),
                                r.rowBegin, r.kernelTaps, r.transposed, r.eps, r.ropeTheta, dtypeName(r.storage));
  if (packed)
    key += fmt::format(" packed for {}: N {} K {} NR {} rowTail {} {} group {} kPack {} gated {}", r.packFor->key(),
                       packed->N, packed->K, packed->NR, packed->rowTail, dtypeName(packed->type), packed->group,
                       packed->kPack, packed->gated);
  return key;
}
bool sameRecipe(const lower::WeightRecipe &a, const lower::WeightRecipe &b) {
  return a.source == b.source && a.tensors == b.tensors && a.shape == b.shape && a.rowBegin == b.rowBegin &&
         a.kernelTaps == b.kernelTaps && a.transposed == b.transposed && a.eps == b.eps && a.ropeTheta == b.ropeTheta && a.storage == b.storage &&
         a.packFor.has_value() == b.packFor.has_value();
}
} // namespace

CompiledModel::ConstantPlan CompiledModel::planConstants(const WeightStore &weights, const CompiledModel *shareWith) {
  if (shareWith) shareWith->waitForWeights();
  weightsFromCache_ = false;
  const size_t n = program_.constants.size();
  ConstantPlan plan;
  plan.gemmOf.assign(n, nullptr);
  plan.built.resize(n);
  // First: the GEMM each packed constant is laid out for, and the constants another
  // model (the decoder's other program) already holds.
  for (size_t id = 0; id < n; ++id) {
    const auto &recipe = program_.constants[id];
    // The step that reads a packed constant owns the kernel whose layout the packing follows.
    if (recipe.packFor) {
      for (size_t s = 0; s < program_.steps.size() && !plan.gemmOf[id]; ++s)
        for (const Operand &o : program_.steps[s].operands)
          if (o.kind == Operand::Kind::Constant && size_t(o.id) == id && steps_[s]->gemm())
            plan.gemmOf[id] = steps_[s]->gemm();
      if (!plan.gemmOf[id]) throw std::logic_error("kernel program: packed constant " + recipe.name + " has no GEMM step");
    }
    if (shareWith && shareWith->weightsSet_)
      for (size_t j = 0; j < shareWith->constants_.size() && !plan.built[id]; ++j) {
        const auto &other = shareWith->constants_[j];
        if (sameRecipe(recipe, shareWith->program_.constants[j]) &&
            (!plan.gemmOf[id] || (other->packed.data() && other->packed.layout() == plan.gemmOf[id]->layout())))
          plan.built[id] = other;
      }
  }
  // The constants left to make: mapped from the weight cache when it has them. Weights
  // in place (a table of row pointers into this process's file mapping) are not cached.
  for (size_t id = 0; id < n; ++id)
    if (!plan.built[id] && !(plan.gemmOf[id] && plan.gemmOf[id]->layout().rowPointers)) plan.toMake.push_back(id);
  if (weights.identity().empty() || plan.toMake.empty()) return plan;
  plan.cache = WeightCache::fromEnvironment(kernelCacheDir_);
  if (!plan.cache) return plan;
  plan.cacheKey = fmt::format("nnc weights\ncode {}\nweights {}\nquantisation per-tensor {} group {}\n", codeFingerprint(),
                              weights.identity(), program_.quant.perTensor, program_.quant.group);
  for (size_t id : plan.toMake) {
    const auto &recipe = program_.constants[id];
    const Gemm *gemm = plan.gemmOf[id];
    plan.cacheKey += recipeKey(recipe, gemm ? &gemm->layout() : nullptr) + "\n";
    int64_t count = 1;
    for (int64_t d : recipe.shape) count *= d;
    plan.cachedBytes.push_back(gemm ? gemm->layout().totalBytesChecked()
                               : recipe.storage != DType::F32
                                   ? (storedTableLayout(recipe, program_.quant.group).totalBytesChecked() + 3) / 4 * 4
                                   : count * int64_t(sizeof(float)));
  }
  if (std::optional<WeightCache::Entry> entry = plan.cache->load(plan.cacheKey, plan.cachedBytes)) {
    auto owner = std::make_shared<const WeightCache::Entry>(std::move(*entry));
    for (size_t i = 0; i < plan.toMake.size(); ++i) {
      auto c = std::make_shared<Constant>();
      if (const Gemm *gemm = plan.gemmOf[plan.toMake[i]]) {
        c->packed = PackedWeights::view(gemm->layout(), owner->blobs[i], owner);
      } else {
        c->mapped = {reinterpret_cast<const float *>(owner->blobs[i]), size_t(plan.cachedBytes[i]) / sizeof(float)};
        c->entry = owner;
      }
      plan.built[plan.toMake[i]] = std::move(c);
    }
    weightsFromCache_ = true;
    plan.cache.reset(); // nothing to store
  }
  return plan;
}

std::shared_ptr<const CompiledModel::Constant> CompiledModel::buildConstant(size_t id, const WeightStore &weights,
                                                                          const ConstantPlan &plan) const {
  // The same bits whichever thread makes it (a run's, in its mode; a builder; the
  // caller of setWeights, in the host's): subnormal weights converted as IEEE says.
  const ScopedFloatMode ieee(Denormals::Keep);
  const auto &recipe = program_.constants[id];
  const Gemm *gemm = plan.gemmOf[id];
  auto c = std::make_shared<Constant>();
  const std::vector<const float *> rows = storedRows(recipe, weights, gemm != nullptr);
  int64_t count = 1;
  for (int64_t d : recipe.shape) count *= d;
  // An f32 table as the file holds it is read where it lies (the file stays mapped).
  const bool view = !gemm && recipe.storage == DType::F32 && weights.fileOwner() && !rows.empty() &&
                    std::all_of(recipe.tensors.begin(), recipe.tensors.end(),
                                [&](const std::string &t) { return weights.get(t).inFile(); }) &&
                    contiguous(rows, count / int64_t(rows.size()));
  // Packed straight from the stored rows when there are any; otherwise made first.
  const bool fromRows = !rows.empty() && (gemm || recipe.storage != DType::F32);
  std::vector<float> values = fromRows || view ? std::vector<float>{} : runtime::makeConstant(recipe, weights);
  codegen::PackOptions quant;
  quant.perTensor = program_.quant.perTensor;
  // Rows in the mapped file are copied out with pread (WeightStore::readRows), not
  // read through the mapping; what is read in place has its pages filled first.
  quant.readRows = [&weights](const float *const *from, int64_t count, int64_t K, float *to) {
    return weights.readRows(from, count, K, to);
  };
  if (quant.perTensor && recipe.storage == DType::I8) quant.tensorMaxOfRow = tensorMaxOfRows(recipe, weights);
  // Weights in place: the file's rows themselves when the recipe's tensors are all in
  // the mapped file; otherwise (made, or held in memory) packRows copies them.
  const bool referFile = gemm && gemm->layout().rowPointers && fromRows && weights.fileOwner() &&
                         std::all_of(recipe.tensors.begin(), recipe.tensors.end(),
                                     [&](const std::string &t) { return weights.get(t).inFile(); });
  if (referFile) {
    for (const std::string &t : recipe.tensors) weights.populateFile(weights.get(t).values());
    c->packed = gemm->referRows(rows.data(), weights.fileOwner());
  } else if (gemm) {
    try {
      c->packed = fromRows ? gemm->packRows(rows.data(), quant) : gemm->pack(values.data(), quant);
    } catch (const codegen::UnstorableWeight &e) { // a weight its dtype cannot hold
      throw UserError(fmt::format("{} {}", elementOrigin(recipe, weights, e.row, e.col), e.problem));
    }
  } else if (recipe.storage != DType::F32) { // a table read by rows (an embedding, a norm's scale)
    // Its bytes in packed memory, as a GEMM's: huge pages, not zeroed twice. A vector's
    // 4 KiB pages zeroed on allocation made TinyLlama's i8 embedding (65.5 M weights,
    // the first step's) in 227 ms on a Zen 3 guest, first-touch faults most of it; 98-106 ms so.
    const codegen::PanelLayout layout = storedTableLayout(recipe, program_.quant.group);
    const size_t words = size_t((layout.totalBytesChecked() + 3) / 4); // in f32 words
    std::shared_ptr<void> table = allocatePacked(words * sizeof(float), codegen::kPackedAlignmentBytes);
    if (!table) throw std::bad_alloc();
    auto *out = static_cast<float *>(table.get());
    c->mapped = {out, words};
    c->entry = std::move(table);
    try {
      if (fromRows) codegen::packWeightRows(layout, rows.data(), out, quant);
      else codegen::packWeightsPanel(layout, values.data(), out, quant);
    } catch (const codegen::UnstorableWeight &e) { // a weight its dtype cannot hold
      throw UserError(fmt::format("{} {}", elementOrigin(recipe, weights, e.row, e.col), e.problem));
    }
  } else if (view) {
    weights.populateFile({rows.front(), size_t(count)});
    c->mapped = {rows.front(), size_t(count)};
    c->entry = weights.fileOwner();
  } else {
    c->values = std::move(values);
  }
  return c;
}

void CompiledModel::storeInCache(const ConstantPlan &plan,
                                 const std::vector<std::shared_ptr<const Constant>> &built) const {
  if (!plan.cache) return;
  std::vector<llvm::ArrayRef<uint8_t>> blobs;
  for (size_t i = 0; i < plan.toMake.size(); ++i)
    if (int64_t((blobs.emplace_back(built[plan.toMake[i]]->bytes())).size()) != plan.cachedBytes[i])
      throw std::logic_error("weight cache: constant " + program_.constants[plan.toMake[i]].name + " has " +
                             std::to_string(blobs.back().size()) + " bytes, its recipe says " +
                             std::to_string(plan.cachedBytes[i]));
  plan.cache->store(plan.cacheKey, blobs); // best effort: a failure only means the next start packs again
}

void CompiledModel::setWeights(const WeightStore &weights, const CompiledModel *shareWith) {
  const auto start = std::chrono::steady_clock::now();
  joinBuilders();
  constants_.clear();
  weightsSet_ = false;
  ConstantPlan plan = planConstants(weights, shareWith);
  // The rest side by side on every core, as the JIT compiles, however few threads the
  // model runs on: packing GBs of weights is a one-time cost, mostly the kernel handing
  // out (zeroing) fresh pages and quantising, which two cores do twice as fast. Errors
  // are kept per constant and the first in program order is thrown, as on one thread.
  const size_t n = plan.built.size();
  std::vector<std::exception_ptr> errors(n);
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const auto wider = pool_->size() < cores ? std::make_unique<ThreadPool>(cores) : nullptr;
  (wider ? *wider : *pool_).parallelFor(int64_t(n), [&](int64_t id) {
    if (plan.built[size_t(id)]) return;
    try {
      plan.built[size_t(id)] = buildConstant(size_t(id), weights, plan);
    } catch (...) {
      errors[size_t(id)] = std::current_exception();
    }
  });
  for (const auto &e : errors)
    if (e) std::rethrow_exception(e);
  storeInCache(plan, plan.built);
  constants_ = std::move(plan.built);
  weightsSet_ = true;
  weightsMillis_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool CompiledModel::setWeightsWhileRunning(std::shared_ptr<const WeightStore> weights) {
  const int free = int(std::max(1u, std::thread::hardware_concurrency())) - pool_->size();
  if (free < 1 || environmentSwitch("NNC_WEIGHTS_WHILE_RUNNING") == false) {
    setWeights(*weights);
    return false;
  }
  const auto start = std::chrono::steady_clock::now();
  joinBuilders();
  ConstantPlan plan = planConstants(*weights, nullptr);
  const size_t n = plan.built.size();
  // In the order the steps first read them, so the first layers' are made first.
  std::vector<size_t> order;
  std::vector<char> queued(n);
  auto queue = [&](size_t id) {
    if (!plan.built[id] && !queued[id]) queued[id] = 1, order.push_back(id);
  };
  for (const auto &step : program_.steps)
    for (const Operand &o : step.operands)
      if (o.kind == Operand::Kind::Constant) queue(size_t(o.id));
  for (size_t id = 0; id < n; ++id) queue(id); // constants no step reads (none today) still get made
  background_ = std::make_unique<Background>();
  Background &bg = *background_;
  bg.model = this;
  bg.constants = &constants_;
  bg.weights = std::move(weights);
  bg.errors.resize(n + 1);
  bg.done.resize(n);
  for (size_t id = 0; id < n; ++id) bg.done[id] = plan.built[id] != nullptr;
  bg.left = order.size();
  bg.start = start;
  bg.lastMade = std::chrono::steady_clock::now(); // when nothing is left to make
  bg.order = std::move(order);
  constants_ = plan.built; // the rest are filled in as they are made
  bg.plan = std::move(plan);
  weightsSet_ = true;
  bg.builders = std::thread([this, &bg, free, n] {
    auto work = [&bg] {
      while (bg.buildNext()) {
      }
    };
    std::vector<std::thread> helpers;
    for (int t = 1; t < free; ++t) helpers.emplace_back(work);
    work();
    for (auto &h : helpers) h.join();
    std::unique_lock<std::mutex> lock(bg.mutex);
    bg.made.wait(lock, [&] { return bg.left == 0; }); // what a run claimed
    bool failed = false;
    for (const auto &e : bg.errors) failed = failed || e;
    lock.unlock();
    std::exception_ptr storeError; // a constant of a size its recipe does not say (a bug)
    try {
      if (!failed) storeInCache(bg.plan, constants_);
    } catch (...) {
      storeError = std::current_exception();
    }
    bg.weights.reset(); // what the constants still read of it (the mapped file) they hold themselves
    lock.lock();
    bg.errors[n] = storeError;
    weightsMillis_ = std::chrono::duration<double, std::milli>(bg.lastMade - bg.start).count();
    bg.finished = true;
    bg.allMade = !failed;
    bg.made.notify_all();
  });
  return true;
}

void CompiledModel::waitForWeights() const {
  if (!background_) return;
  Background &bg = *background_;
  std::unique_lock<std::mutex> lock(bg.mutex);
  bg.made.wait(lock, [&] { return bg.finished; });
  for (const auto &e : bg.errors)
    if (e) std::rethrow_exception(e);
}

void CompiledModel::awaitConstants(size_t step) const {
  Background &bg = *background_;
  for (const Operand &o : program_.steps[step].operands) {
    if (o.kind != Operand::Kind::Constant) continue;
    const size_t id = size_t(o.id);
    auto isDone = [&] {
      std::lock_guard<std::mutex> lock(bg.mutex);
      return bg.done[id] != 0;
    };
    // While a builder makes it, this thread makes the next ones rather than sit idle.
    while (!isDone() && bg.buildNext()) {
    }
    std::unique_lock<std::mutex> lock(bg.mutex);
    bg.made.wait(lock, [&] { return bg.done[id] != 0; });
    if (bg.errors[id]) std::rethrow_exception(bg.errors[id]);
  }
}

int64_t CompiledModel::constantBytes() const {
  waitForWeights();
  int64_t bytes = 0;
  for (const auto &c : constants_)
    bytes += int64_t(c->bytes().size());
  return bytes;
}

int64_t CompiledModel::packedConstantBytes() const {
  waitForWeights();
  int64_t bytes = 0;
  for (const auto &c : constants_)
    if (c->packed.data())
      bytes += c->packed.layout().rowPointers ? c->packed.layout().N * c->packed.layout().K * int64_t(sizeof(float))
                                              : c->packed.bytes();
  return bytes;
}

std::vector<MemorySpan> CompiledModel::packedConstantSpans() const {
  waitForWeights();
  std::vector<MemorySpan> spans;
  for (const auto &c : constants_) {
    if (!c->packed.data()) continue;
    const codegen::PanelLayout &layout = c->packed.layout();
    if (!layout.rowPointers) {
      spans.push_back({c->packed.data(), size_t(c->packed.bytes())});
      continue;
    }
    const auto *rows = reinterpret_cast<const float *const *>(c->packed.data());
    for (int64_t n = 0; n < layout.N; ++n) spans.push_back({rows[n], size_t(layout.K) * sizeof(float)});
  }
  return spans;
}

const int32_t *CompiledModel::argmaxIds(const Workspace &workspace) const {
  if (program_.argmax < 0) return nullptr;
  return reinterpret_cast<const int32_t *>(workspace.arena() + program_.buffers[size_t(program_.argmax)].offset);
}

void CompiledModel::run(const float *input, float *output, Workspace &workspace, std::vector<double> *stepMicros,
                        float *state, int64_t past) const {
  if (!weightsSet_) throw std::logic_error("CompiledModel::run before setWeights");
  if (program_.stateFloats > 0 && (!state || past < 0 || past + program_.inputType.shape.at(1) > program_.kvContext))
    throw std::logic_error("CompiledModel::run: a decoder's program needs its state and past + seq <= its context");
  // From a thread with less stack left than the kernels' frames and the runtime's, the
  // call runs on a thread of nnc's own (KernelStack.h).
  if (stackRoom() < runStackBytes_)
    return runOnKernelStack([&] { run(input, output, workspace, stepMicros, state, past); }, runStackBytes_);
  const ScopedFloatMode floatMode(denormals_); // the pool's workers take it from this thread
  float *arena = workspace.arena();
  const auto &buffers = program_.buffers;
  auto base = [&](int32_t b) { return buffers[size_t(b)].viewOf >= 0 ? buffers[size_t(b)].viewOf : b; };
  const size_t inBytes = size_t(inputType().elements()) * sizeof(float);
  const size_t outBytes = size_t(outputType().elements()) * sizeof(float);
  // The steps read the caller's input and write the caller's output in place (no
  // copies: at batch 64 the MLP's input alone is 200 KB), unless the two buffers
  // overlap or the output is the input itself (or a view of it); then both go through
  // the arena. No step writes the input's buffer: steps write only their own values.
  const int32_t inBase = base(program_.input), outBase = base(program_.output);
  const auto in = reinterpret_cast<uintptr_t>(input), out = reinterpret_cast<uintptr_t>(output);
  const bool direct = outBase != inBase && (in + inBytes <= out || out + outBytes <= in);
  auto at = [&](int32_t b) -> float * {
    if (buffers[size_t(b)].role == lower::Buffer::Role::State) return state + buffers[size_t(b)].offset;
    const int32_t root = base(b);
    if (direct && root == inBase) return const_cast<float *>(input);
    if (direct && root == outBase) return output;
    return arena + buffers[size_t(root)].offset;
  };
  if (!direct) std::memcpy(at(program_.input), input, inBytes);
  ThreadPool *pool = pool_->size() > 1 ? pool_.get() : nullptr;
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (background_ && !background_->allMade.load(std::memory_order_acquire)) awaitConstants(s);
    OperandPointers ptrs{};
    const auto &operands = program_.steps[s].operands;
    for (size_t k = 0; k < operands.size(); ++k) {
      const Operand &o = operands[k];
      if (o.kind == Operand::Kind::Buffer) ptrs.at(k) = at(o.id);
      else if (o.kind == Operand::Kind::Constant) ptrs.at(k) = constants_[size_t(o.id)]->pointer();
    }
    try {
      const auto start = stepMicros ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      steps_[s]->run(ptrs, pool, past);
      if (stepMicros)
        (*stepMicros)[s] += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    } catch (const UserError &e) { // bad data (a token id out of range): name the layer
      const lower::Step &st = program_.steps[s];
      throw UserError(fmt::format("layer '{}' ({}, line {}): {}", st.layer, st.opKind, st.line, e.what()));
    }
  }
  if (!direct) std::memcpy(output, at(program_.output), outBytes);
}

} // namespace nnc::runtime
