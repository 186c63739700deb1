// A model ready to run: the interpreter of a kernel program (compiler/lower/
// KernelProgram.h). It compiles one kernel per step (kernels are cached by key in the
// JitEngine, so repeated shapes compile once), makes every constant from the weights
// by its recipe (folds, packing) once — before the first run, or on the free cores
// while it runs (setWeightsWhileRunning) — and allocates the one arena the program's
// buffer plan sized. It knows kernel families, never layer kinds.
//
// A program with a step that has no kernel is refused at construction with a
// UserError naming the layer (its topic says why, for the CLI's hint).
// Threads: run(in, out, workspace) may be called from many threads at once, each with
// its own Workspace (the activations of one call); run(in, out) uses the model's own
// workspace, so one thread at a time. Calls that overlap share the thread pool, whose
// parallel sections take turns.
#pragma once
#include <memory>
#include <vector>

#include "compiler/lower/KernelProgram.h"
#include "runtime/BandwidthProbe.h"
#include "runtime/FloatMode.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/model/StepKernels.h"
#include "runtime/model/WeightStore.h"

namespace nnc::runtime {

class CompiledModel {
public:
  // denormals: how run() treats subnormal f32 values (FloatMode.h; flushed to zero by default).
  CompiledModel(lower::KernelProgram program, JitEngine &jit, int threads, Denormals denormals = Denormals::Flush);
  // The UserError the constructor throws for a program with a layer that cannot run
  // (naming the layer, its line and why), or nothing.
  static void requireRunnable(const lower::KernelProgram &program);
  ~CompiledModel();

  // Makes every constant (folding linear chains, packing GEMM weights); call before run().
  // With `shareWith` (a model of the same network, e.g. a decoder's program at another
  // sequence length), constants with the same recipe and layout are shared, not made again.
  // With the weight cache on (WeightCache.h: NNC_WEIGHT_CACHE=on) and weights from a
  // file, the constants left to make are mapped from the cache's entry when it has one,
  // and stored there after they are made when it has not.
  void setWeights(const WeightStore &weights, const CompiledModel *shareWith = nullptr);
  // setWeights for a run that starts at once (nnc --generate and --run on fewer threads
  // than cores): the constants left to make are made on the cores the model's threads
  // leave free, in the order the steps read them, while the model runs; run() waits for
  // each constant a step reads before it runs the step, and throws the constant's error
  // if making it failed (a step waiting for its constants makes the next ones meanwhile).
  // With no core left free, or NNC_WEIGHTS_WHILE_RUNNING=off (timings of the kernels
  // alone), this is setWeights. The store is held until every constant is made. Returns
  // whether constants are being made in the background.
  bool setWeightsWhileRunning(std::shared_ptr<const WeightStore> weights);
  // Waits until every constant is made (at once after setWeights) and throws the first
  // error in program order, as setWeights would have.
  void waitForWeights() const;
  // Whether the last setWeights mapped its constants from the weight cache.
  bool weightsFromCache() const { return weightsFromCache_; }
  // How long the last setWeights took (setWeightsWhileRunning: from its call until the
  // last constant was made); waits for the constants.
  double weightsMillis() const {
    waitForWeights();
    return weightsMillis_;
  }
  // The activation memory of one call: the program's arena (arenaBytes() bytes).
  class Workspace {
  public:
    float *arena() const { return arena_.get(); }

  private:
    friend class CompiledModel;
    std::unique_ptr<float, void (*)(void *)> arena_{nullptr, &std::free};
  };
  // Allocates a workspace; a UserError (topic ActivationMemory) when it cannot.
  std::unique_ptr<Workspace> newWorkspace() const;

  // input: elements of the input type (4 bytes each: f32, or i32 token ids passed as
  // their bits); output: elements of the output type. The steps
  // read `input` and write `output` in place; buffers that overlap are copied instead.
  // stepMicros (optional, program().steps.size() entries): each step's wall time is
  // added to its entry (nnc --bench --profile).
  // A decoder's program (program().stateFloats > 0) also takes its state: stateFloats
  // floats kept between calls (the KV caches), and `past`, the positions already in it
  // (past + the program's sequence <= program().kvContext).
  void run(const float *input, float *output, Workspace &workspace, std::vector<double> *stepMicros = nullptr,
           float *state = nullptr, int64_t past = 0) const;
  // The same in the model's own workspace, made at the first such call (not when the
  // model is: the library's Model and the decoders run in workspaces of their own, and a
  // workspace made with the model went unused, an arena of memory before any bill).
  // Not for several threads at once.
  void run(const float *input, float *output, std::vector<double> *stepMicros = nullptr) {
    if (!ownWorkspace_) ownWorkspace_ = newWorkspace();
    run(input, output, *ownWorkspace_, stepMicros);
  }

  // A greedy decoder's program (program().argmax >= 0): the ids its Argmax step wrote
  // in `workspace` during the last run (one i32 per logits row, batch-major); null for
  // other programs.
  const int32_t *argmaxIds(const Workspace &workspace) const;

  const lower::KernelProgram &program() const { return program_; }
  const ir::TensorType &inputType() const { return program_.inputType; }
  const ir::TensorType &outputType() const { return program_.outputType; }
  double compileMillis() const { return compileMillis_; }
  // The distinct kernels this model runs, in step order (for --emit llvm|asm).
  std::vector<codegen::KernelSpec> kernels() const;
  int threads() const { return pool_->size(); }
  Denormals denormals() const { return denormals_; }
  // The stack a run() takes: its deepest kernel's frames (JitEngine::stackBytes) and
  // kRunFrameBytes (KernelStack.h). A caller with less left has the run done on a thread
  // of nnc's own; the pool's workers have this much.
  size_t runStackBytes() const { return runStackBytes_; }
  // Bytes of the constants the model holds (GEMM weights packed in their storage dtype
  // with their scales, weights in place as their tables of row pointers, the rest f32);
  // 0 before setWeights. This and packedConstantBytes wait for the constants.
  int64_t constantBytes() const;
  // The GEMMs' weights: what every call reads whole (a gather reads only its rows of an
  // embedding table) — packed, or in place the rows the tables point at.
  int64_t packedConstantBytes() const;
  // Where those bytes lie: one span per packed constant, or per row in place (for a read
  // probe over them, runtime/BandwidthProbe.h); their sizes sum to packedConstantBytes().
  std::vector<MemorySpan> packedConstantSpans() const;

private:
  struct Constant; // packed weights or plain f32
  struct ConstantPlan; // what setWeights decides before it makes anything
  struct Background;   // setWeightsWhileRunning's builders
  ConstantPlan planConstants(const WeightStore &weights, const CompiledModel *shareWith);
  std::shared_ptr<const Constant> buildConstant(size_t id, const WeightStore &weights, const ConstantPlan &plan) const;
  void storeInCache(const ConstantPlan &plan, const std::vector<std::shared_ptr<const Constant>> &built) const;
  void awaitConstants(size_t step) const; // those step `step` reads, while the background makes them
  void joinBuilders(); // and forgets them (their constants stay)
  lower::KernelProgram program_;
  std::vector<std::unique_ptr<StepKernel>> steps_;
  std::vector<std::shared_ptr<const Constant>> constants_;
  std::unique_ptr<Workspace> ownWorkspace_;
  std::unique_ptr<ThreadPool> pool_;
  size_t runStackBytes_ = 0;
  Denormals denormals_ = Denormals::Flush;
  double compileMillis_ = 0;
  double weightsMillis_ = 0; // (Background::mutex while constants are made in the background)
  std::string kernelCacheDir_; // the engine's ("" none): the weight cache lives under it
  bool weightsSet_ = false;
  bool weightsFromCache_ = false;
  std::unique_ptr<Background> background_; // while (and after) constants are made in the background
};

} // namespace nnc::runtime
