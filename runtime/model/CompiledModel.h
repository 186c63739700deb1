// A model ready to run: its lowered graph, one compiled kernel per step (kernels are
// cached by key in the JitEngine, so repeated shapes compile once), weights packed
// once into the kernels' layout, and one arena planned for all activations.
//
// Supported at run time now: dense (with fused bias, activation and residual add),
// standalone activations, softmax, residual adds, and the views flatten, identity and
// dropout. Other layers are reported by --report but rejected here with a UserError
// naming the layer (conv nets and transformers come with later issues).
// run() may be called from one thread at a time per CompiledModel.
#pragma once
#include <memory>
#include <vector>

#include "compiler/ir/Ir.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gemm.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/model/ArenaPlan.h"
#include "runtime/model/WeightStore.h"

namespace nnc::runtime {

class CompiledModel {
public:
  CompiledModel(ir::Graph lowered, JitEngine &jit, int threads);
  ~CompiledModel();

  // Packs every weight (folding linear chains first); call before run().
  void setWeights(const WeightStore &weights);
  // input: elements of the input type; output: elements of the output type. The steps
  // read `input` and write `output` in place; buffers that overlap are copied instead.
  void run(const float *input, float *output);

  const ir::Graph &graph() const { return graph_; }
  const ir::TensorType &inputType() const { return graph_.ops.front().type; }
  const ir::TensorType &outputType() const { return graph_.op(graph_.output).type; }
  double compileMillis() const { return compileMillis_; }
  // The kernels this model runs, in step order (for --emit llvm|asm).
  std::vector<codegen::GemmSpec> gemmSpecs() const;
  std::vector<codegen::ElementwiseSpec> elementwiseSpecs() const;
  int threads() const { return pool_->size(); }

private:
  struct Step;
  ir::Graph graph_;
  std::vector<std::unique_ptr<Step>> steps_;
  ArenaPlan plan_;
  std::unique_ptr<float, void (*)(void *)> arena_{nullptr, &std::free};
  std::unique_ptr<ThreadPool> pool_;
  double compileMillis_ = 0;
  bool weightsSet_ = false;
};

} // namespace nnc::runtime
