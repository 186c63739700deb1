#include "runtime/model/CompiledModel.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/LargeAllocation.h"

namespace nnc::runtime {
using ir::OpKind;

struct CompiledModel::Step {
  size_t op = 0;
  std::unique_ptr<Gemm> gemm;
  PackedWeights packed;
  std::vector<float> bias;
  std::unique_ptr<Elementwise> elementwise;
};

namespace {
codegen::Activation activationOf(OpKind k) {
  switch (k) {
  case OpKind::Relu: return codegen::Activation::Relu;
  case OpKind::Relu6: return codegen::Activation::Relu6;
  case OpKind::Sigmoid: return codegen::Activation::Sigmoid;
  case OpKind::Tanh: return codegen::Activation::Tanh;
  case OpKind::Gelu: return codegen::Activation::Gelu;
  case OpKind::GeluTanh: return codegen::Activation::GeluTanh;
  case OpKind::Silu: return codegen::Activation::Silu;
  default: return codegen::Activation::None;
  }
}

// W = Wk·…·W0 and b = Wk·(…) + bk for a folded chain of dense layers (PyTorch [out, in]
// layout), in double so the fold adds no more rounding than one f32 store.
void foldChain(const ir::Op &op, const WeightStore &w, std::vector<float> &W, std::vector<float> &b) {
  std::vector<double> curW, curB;
  int64_t rows = 0, cols = 0;
  for (size_t j = 0; j < op.foldedFrom.size(); ++j) {
    const std::string &name = op.foldedFrom[j];
    const Tensor &Wj = w.get(name + ".weight");
    int64_t out = Wj.shape[0], in = Wj.shape[1];
    std::vector<double> bj(size_t(out), 0.0);
    if (w.has(name + ".bias")) {
      const auto &bv = w.get(name + ".bias").values;
      for (int64_t r = 0; r < out; ++r) bj[size_t(r)] = bv[size_t(r)];
    }
    if (j == 0) {
      curW.assign(Wj.values.begin(), Wj.values.end());
      curB = bj;
      rows = out;
      cols = in;
      continue;
    }
    std::vector<double> nextW(size_t(out * cols), 0.0), nextB = bj;
    for (int64_t r = 0; r < out; ++r)
      for (int64_t m = 0; m < rows; ++m) {
        double wrm = Wj.values[size_t(r * in + m)];
        nextB[size_t(r)] += wrm * curB[size_t(m)];
        for (int64_t c = 0; c < cols; ++c) nextW[size_t(r * cols + c)] += wrm * curW[size_t(m * cols + c)];
      }
    curW.swap(nextW);
    curB.swap(nextB);
    rows = out;
  }
  W.assign(curW.begin(), curW.end());
  b.assign(curB.begin(), curB.end());
}


// The kernel an op runs, if any: a GEMM, an elementwise kernel, or none (a view).
struct OpKernel {
  std::optional<codegen::GemmSpec> gemm;
  std::optional<codegen::ElementwiseSpec> elementwise;
};

OpKernel kernelFor(const ir::Graph &graph, const ir::Op &op) {
  OpKernel k;
  const ir::TensorType &in = graph.op(op.inputs[0]).type;
  const int64_t cols = op.type.shape.back();
  const int64_t rows = op.type.elements() / cols;
  if (op.kind == OpKind::Dense) {
    // Never run a model other than the one described: a layer stored at another dtype
    // is refused rather than silently run at f32.
    if (op.weightDType != DType::F32)
      throw UserError(fmt::format("layer '{}' (dense, line {}) stores its weights as {}: nnc runs f32 weights only "
                                  "for now (--report covers every dtype); drop dtype= / --dtype to run it at f32",
                                  op.name, op.loc.begin.line, dtypeName(op.weightDType)));
    codegen::GemmSpec spec;
    spec.K = op.attrs.in;
    spec.N = op.attrs.out;
    spec.M = in.elements() / spec.K;
    spec.bias = op.attrs.bias;
    spec.act = activationOf(op.epilogue);
    spec.residual = op.residualInput >= 0;
    spec.weightType = DType::F32; // low-precision storage arrives with its own issue
    k.gemm = spec;
  } else if (ir::isElementwiseActivation(op.kind)) {
    k.elementwise = codegen::ElementwiseSpec{codegen::ElementwiseSpec::Activation, activationOf(op.kind), rows, cols};
  } else if (op.kind == OpKind::Softmax) {
    k.elementwise = codegen::ElementwiseSpec{codegen::ElementwiseSpec::Softmax, codegen::Activation::None, rows, cols};
  } else if (op.kind == OpKind::Add) {
    k.elementwise = codegen::ElementwiseSpec{codegen::ElementwiseSpec::Add, codegen::Activation::None, rows, cols};
  } else if (!isViewOp(op.kind)) {
    throw UserError(fmt::format("layer '{}' ({}, line {}): nnc cannot run {} layers yet (--report covers them); "
                                "at run time it supports dense, activations, softmax, residual, flatten, "
                                "identity and dropout",
                                op.name, ir::opKindName(op.kind), op.loc.begin.line, ir::opKindName(op.kind)));
  }
  return k;
}
} // namespace

CompiledModel::CompiledModel(ir::Graph lowered, JitEngine &jit, int threads) : graph_(std::move(lowered)) {
  auto start = std::chrono::steady_clock::now();
  pool_ = std::make_unique<ThreadPool>(threads);
  // All kernels first, so the JIT compiles the missing ones side by side.
  std::vector<OpKernel> kernels;
  std::vector<codegen::KernelSpec> specs;
  for (size_t i = 1; i < graph_.ops.size(); ++i) {
    kernels.push_back(kernelFor(graph_, graph_.ops[i]));
    if (kernels.back().gemm) specs.push_back(*kernels.back().gemm);
    if (kernels.back().elementwise) specs.push_back(*kernels.back().elementwise);
  }
  jit.prepare(specs);
  for (size_t i = 1; i < graph_.ops.size(); ++i) {
    auto step = std::make_unique<Step>();
    step->op = i;
    const OpKernel &k = kernels[i - 1];
    if (k.gemm) step->gemm = std::make_unique<Gemm>(jit, *k.gemm);
    if (k.elementwise) step->elementwise = std::make_unique<Elementwise>(jit, *k.elementwise);
    steps_.push_back(std::move(step));
  }
  plan_ = planArena(graph_);
  size_t bytes = size_t(std::max<int64_t>(plan_.sizeFloats, 16)) * sizeof(float);
  void *mem = allocateLarge(bytes, 64);
  if (!mem)
    throw UserError(fmt::format("model '{}' at batch {} needs {} bytes of activation memory ({:.2f} GiB) and this "
                                "machine could not allocate them; try a smaller --batch",
                                graph_.modelName, graph_.batch, withCommas(int64_t(bytes)),
                                double(bytes) / double(1LL << 30)));
  arena_.reset(static_cast<float *>(mem));
  compileMillis_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

CompiledModel::~CompiledModel() = default;

std::vector<codegen::GemmSpec> CompiledModel::gemmSpecs() const {
  std::vector<codegen::GemmSpec> out;
  for (const auto &s : steps_)
    if (s->gemm) out.push_back(s->gemm->spec());
  return out;
}

std::vector<codegen::ElementwiseSpec> CompiledModel::elementwiseSpecs() const {
  std::vector<codegen::ElementwiseSpec> out;
  for (const auto &s : steps_)
    if (s->elementwise) out.push_back(s->elementwise->spec());
  return out;
}

void CompiledModel::setWeights(const WeightStore &weights) {
  for (auto &step : steps_) {
    if (!step->gemm) continue;
    const ir::Op &op = graph_.ops[step->op];
    std::vector<float> W;
    if (!op.foldedFrom.empty()) {
      foldChain(op, weights, W, step->bias);
    } else {
      const std::string weightName = op.attrs.tie.empty() ? op.name + ".weight" : op.attrs.tie + ".weight";
      W = weights.get(weightName).values;
      if (op.attrs.bias) step->bias = weights.get(op.name + ".bias").values;
    }
    step->packed = step->gemm->pack(W.data());
  }
  weightsSet_ = true;
}

void CompiledModel::run(const float *input, float *output) {
  if (!weightsSet_) throw std::logic_error("CompiledModel::run before setWeights");
  float *arena = arena_.get();
  const size_t inBytes = size_t(inputType().elements()) * sizeof(float);
  const size_t outBytes = size_t(outputType().elements()) * sizeof(float);
  // The steps read the caller's input and write the caller's output in place (no
  // copies: at batch 64 the MLP's input alone is 200 KB), unless the two buffers
  // overlap or the output is the input itself (or a view of it); then both go through
  // the arena. No step writes the input's buffer: steps write only their own op's.
  const size_t outRoot = plan_.root[size_t(graph_.output)];
  const auto in = reinterpret_cast<uintptr_t>(input), out = reinterpret_cast<uintptr_t>(output);
  const bool direct = outRoot != 0 && (in + inBytes <= out || out + outBytes <= in);
  auto at = [&](size_t op) -> float * {
    if (direct && plan_.root[op] == 0) return const_cast<float *>(input);
    if (direct && plan_.root[op] == outRoot) return output;
    return arena + plan_.offset[op];
  };
  if (!direct) std::memcpy(arena + plan_.offset[0], input, inBytes);
  ThreadPool *pool = pool_->size() > 1 ? pool_.get() : nullptr;
  for (auto &step : steps_) {
    const ir::Op &op = graph_.ops[step->op];
    const float *x = at(size_t(op.inputs[0]));
    float *y = at(step->op);
    if (step->gemm) {
      const float *res = op.residualInput >= 0 ? at(size_t(op.residualInput)) : nullptr;
      step->gemm->run(x, step->packed, step->bias.empty() ? nullptr : step->bias.data(), res, y, pool);
    } else if (step->elementwise) {
      const float *x2 = op.inputs.size() > 1 ? at(size_t(op.inputs[1])) : nullptr;
      step->elementwise->run(x, x2, y, pool);
    }
  }
  if (!direct) std::memcpy(output, arena + plan_.offset[size_t(graph_.output)], outBytes);
}

} // namespace nnc::runtime
