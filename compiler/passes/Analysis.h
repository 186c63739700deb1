// What the analysis passes compute about one model at one batch size. The report
// renders these numbers; it computes none of its own.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/support/DType.h"

namespace nnc::passes {

// Per op (indexed like Graph::ops). Counts are for the whole batch unless named
// *PerExample.
struct OpCosts {
  int64_t params = 0;       // owned parameters (weights + biases)
  int64_t weights = 0;      // parameters that are not biases
  int64_t buffers = 0;      // non-trainable tensors (batchnorm running stats)
  int64_t macs = 0;         // multiply-accumulates of the layer's matrices, whole batch
  int64_t macsPerExample = 0;
  int64_t attentionMacs = 0; // QKᵀ and AV, whole batch (not in macs)
  int64_t otherOps = 0;      // adds, activations, normalisations: elementwise work, whole batch
  int64_t weightBytesStored = 0; // params at this op's storage dtype
  int64_t outputElements = 0;    // whole batch
  int64_t outputBytes = 0;
  // Traffic (page 001): numbers moved = weights (no biases) + inputs + outputs.
  int64_t trafficWeights = 0; // weights read: `weights`, or a tied dense's table (it owns none)
  int64_t trafficNumbers = 0;
  int64_t trafficBytes = 0;  // weights at their stored dtype, activations at theirs
  double intensity = 0;      // MACs per number moved
  double weightShareOfTraffic = 0;
};

struct Totals {
  int64_t params = 0, weights = 0, buffers = 0;
  int64_t macs = 0, macsPerExample = 0, attentionMacs = 0, otherOps = 0;
  std::map<DType, int64_t> weightBytes; // every parameter at that dtype
  int64_t weightBytesStored = 0;
  int64_t matrixParams = 0; // parameters in dense/conv/attention/mlp matrices
};

struct MemoryEstimate {
  int64_t inputBytes = 0;
  int64_t outputBytes = 0;
  int64_t activationBytesAll = 0;     // every layer's output at the batch, summed
  int64_t activationPeakBytes = 0;    // inference peak with buffers reused (liveness), as written
  int64_t scoresPeakBytes = 0;        // of which attention scores (heads × seq × seq) at the peak
  // KV cache of a decoder: keys and values per token of one sequence (all layers), in
  // elements, and the context it is sized for (the model's sequence length).
  int64_t kvCacheElementsPerToken = 0;
  int64_t kvCacheContext = 0;
  // The same in bytes as a decoder allocates them per cache dtype (f32, f16, bf16, i8;
  // i8 with a scale per head vector; codegen::kvCacheBytesPerPosition).
  std::map<DType, int64_t> kvCacheBytesPerToken;
  int64_t activationTrainingBytes = 0; // what the backward pass keeps
  struct Training {
    const char *optimizer;
    int64_t statesPerParam; // optimizer state, in f32 copies of the parameters
    int64_t weightsBytes, gradientBytes, optimizerBytes, activationBytes, totalBytes;
  };
  std::vector<Training> training; // SGD, momentum, Adam
};

struct Traffic {
  int64_t numbers = 0;      // whole model, whole batch
  int64_t weightNumbers = 0;
  double intensity = 0;
};

struct LintWarning {
  size_t firstOp, secondOp;
  std::string message;
};

struct ModelAnalysis {
  std::vector<OpCosts> ops;
  Totals totals;
  MemoryEstimate memory;
  Traffic traffic;
  std::vector<LintWarning> lints;
};

} // namespace nnc::passes
