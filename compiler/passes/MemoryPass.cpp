// MemoryPass: activation memory at the batch, and a training estimate.
//
// Assumes: shape inference and count-params ran.
// Guarantees (analysis.memory and OpCosts::output*):
//  - each op's output at the batch (activations are f32, token ids i32: 4 bytes);
//  - the inference peak when buffers are reused, as written: an op writes a fresh
//    buffer, and a buffer is freed after its last reader; the peak is the largest sum
//    of live buffers while any op runs, plus the op's temporaries (eager attention's
//    score matrix, from the op's cost rule). What nnc's runtime allocates after its
//    rewrites is the kernel program's arena (compiler/lower/BufferPlan.h);
//  - the KV cache a decoder keeps: per token, the keys and values of every attention
//    layer (cost rule), and the context it is sized for (the model's sequence length);
//  - what training keeps for the backward pass: the input and every layer's output
//    (as autograd keeps them; in-place tricks and recomputation are not assumed);
//  - weights + gradients + optimizer state + kept activations, all f32, for SGD
//    (no state), SGD with momentum (1 copy) and Adam (2 copies).
#include <fmt/format.h>

#include "compiler/codegen/KernelSpec.h"
#include "compiler/ops/OpTable.h"
#include "compiler/passes/Pass.h"
#include "compiler/support/CheckedMath.h"

namespace nnc::passes {

namespace {
class MemoryPass : public Pass {
public:
  const char *name() const override { return "memory"; }
  bool run(ir::Graph &g, PassContext &ctx) override {
    ModelAnalysis &an = ctx.analysis;
    an.ops.resize(g.ops.size());
    MemoryEstimate &m = an.memory;
    m = MemoryEstimate{};
    size_t at = 0; // the op being counted, for the error message
    try {
      std::vector<size_t> lastUse(g.ops.size());
      for (size_t i = 0; i < g.ops.size(); ++i) {
        at = i;
        lastUse[i] = i;
        for (ir::ValueId v : g.ops[i].inputs) lastUse[size_t(v)] = i;
        OpCosts &c = an.ops[i];
        c.outputElements = g.ops[i].type.elements();
        c.outputBytes = bytesFor(c.outputElements, g.ops[i].type.dtype);
        m.activationTrainingBytes = addChecked(m.activationTrainingBytes, c.outputBytes);
        if (g.ops[i].isLayer) m.activationBytesAll = addChecked(m.activationBytesAll, c.outputBytes);
      }
      lastUse[size_t(g.output)] = g.ops.size(); // the result outlives the run
      // Sweep: op i's output becomes live at i; buffers whose last reader is i are
      // freed after i runs.
      std::vector<int64_t> freedAfter(g.ops.size() + 1, 0);
      for (size_t v = 0; v < g.ops.size(); ++v)
        freedAfter[lastUse[v]] = addChecked(freedAfter[lastUse[v]], an.ops[v].outputBytes);
      int64_t live = 0;
      for (size_t i = 0; i < g.ops.size(); ++i) {
        at = i;
        const ir::Op &op = g.ops[i];
        const ops::OpWork w = ops::opInfo(op.kind).cost(g, op);
        const int64_t scratch = bytesFor(mulChecked(w.scratchElementsPerExample, g.batch), DType::F32);
        live = addChecked(live, an.ops[i].outputBytes);
        if (addChecked(live, scratch) > m.activationPeakBytes) {
          m.activationPeakBytes = live + scratch;
          m.scoresPeakBytes = scratch;
        }
        live -= freedAfter[i];
        if (w.kvCacheElementsPerToken) {
          m.kvCacheElementsPerToken = addChecked(m.kvCacheElementsPerToken, w.kvCacheElementsPerToken);
          for (DType dt : kKvCacheDTypes)
            m.kvCacheBytesPerToken[dt] =
                addChecked(m.kvCacheBytesPerToken[dt],
                           codegen::kvCacheBytesPerPosition(dt, w.kvCacheElementsPerToken / 2 / w.kvCacheHeadDim,
                                                            w.kvCacheHeadDim));
          m.kvCacheContext = std::max(m.kvCacheContext, op.type.shape.size() > 2 ? op.type.shape[1] : int64_t(1));
        }
      }
      m.inputBytes = an.ops[0].outputBytes;
      m.outputBytes = an.ops[size_t(g.output)].outputBytes;
    } catch (const CountOverflow &) {
      const ir::Op &op = g.ops[at];
      ctx.diags.error(op.loc, fmt::format("activation memory does not fit in 64 bits (at most {} bytes) at layer '{}' "
                                          "({}, output {}, batch {})",
                                          withCommas(INT64_MAX), op.name, ir::opKindName(op.kind), op.type.str(),
                                          g.batch));
      return false;
    }
    // The training estimates: f32 weights, their gradients, the optimizer's states and
    // the activations kept for the backward pass (docs/figures.md).
    const char *optimizer = "";
    try {
      const int64_t weights = bytesFor(an.totals.params, DType::F32);
      struct Opt { const char *name; int64_t states; };
      for (Opt o : {Opt{"SGD", 0}, Opt{"SGD with momentum", 1}, Opt{"Adam", 2}}) {
        optimizer = o.name;
        MemoryEstimate::Training t{o.name, o.states, weights, weights, mulChecked(weights, o.states),
                                   m.activationTrainingBytes, 0};
        t.totalBytes = addChecked(addChecked(t.weightsBytes, t.gradientBytes),
                                  addChecked(t.optimizerBytes, t.activationBytes));
        m.training.push_back(t);
      }
    } catch (const CountOverflow &) {
      ctx.diags.error(g.ops.back().loc,
                      fmt::format("the memory to train model '{}' with {} does not fit in 64 bits (at most {} bytes): "
                                  "its {} parameters take 4 bytes each as f32 weights, as much again as gradients, "
                                  "and the optimizer's states on top",
                                  g.modelName, optimizer, withCommas(INT64_MAX), withCommas(an.totals.params)));
      return false;
    }
    return true;
  }
};
} // namespace

std::unique_ptr<Pass> createMemoryPass() { return std::make_unique<MemoryPass>(); }

} // namespace nnc::passes
