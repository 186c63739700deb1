// The cost rule of every op kind (LANGUAGE.md §3 table): multiply-accumulates of its
// matrices, attention-score MACs, and the elementwise "other operations" (bias adds,
// activations, residual adds, norms, pools). Shared by the MAC-count and traffic
// passes; a test checks every OpKind has a rule.
#pragma once
#include "compiler/ir/Ir.h"

namespace nnc::passes {

struct OpWork {
  int64_t macsPerExample = 0;
  int64_t attentionMacsPerExample = 0;
  int64_t otherOpsPerExample = 0;
};

// Throws CountOverflow when a count does not fit in 64 bits.
OpWork opWork(const ir::Graph &g, const ir::Op &op);

} // namespace nnc::passes
