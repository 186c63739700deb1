// The on/off environment variables (docs/cli.md, "Environment"): NNC_CACHE,
// NNC_WEIGHT_CACHE, NNC_PREFETCH_16BIT (which also takes a distance:
// runtime/jit/WeightPrefetch.h), NNC_DIGIT_PRODUCTS, NNC_PERF_MAP,
// NNC_WEIGHTS_WHILE_RUNNING, NNC_PAIRED_PANELS, NNC_PREFETCH_DOT. One spelling
// rule for all of them, and a value none of them means is an error, not a silent
// default.
#pragma once
#include <optional>

namespace nnc::runtime {

// Unset or empty: nullopt. on, 1, true, yes: true; off, 0, false, no: false (any
// case). Anything else throws a UsageError naming the variable and its value.
std::optional<bool> environmentSwitch(const char *name);

// Every nnc environment variable read now, so that a malformed one is an error at start
// even when this run would not have read it (NNC_PREFETCH_16BIT=maybe on a model with no
// 16-bit GEMM, NNC_WEIGHT_CACHE_MAX=abc with the weight cache off). Throws UsageError.
void checkEnvironment();

} // namespace nnc::runtime
