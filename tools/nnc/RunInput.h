// The input of --run (and --compare-dtypes --input): an .npy or raw file, checked
// against the model's input before its data is read.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "CommandLine.h"
#include "compiler/ir/Ir.h"

namespace nnc::cli {

// The input file, checked against the model's input; an .npy's leading axis sets the
// batch (a file without a batch axis is batch 1). A model whose input is i32 (token
// ids) takes an .npy of int32 or int64 (converted; an int64 id beyond int32 is an
// error) or raw little-endian int32; the ids are checked against the vocabulary when
// the embedding runs.
struct InputData {
  std::vector<float> values; // 4-byte elements: f32 values, or the bits of i32 token ids
  int64_t batch = 0; // 0: from --batch
};

// Called once the input's batch (0: from --batch) and the bytes reading it takes are
// known, before its data is read: the whole run's memory is checked there.
using BeforeReading = std::function<void(int64_t batch, int64_t inputBytes)>;

// Reads opts.runInput for a model whose input is `modelInput`.
InputData readInput(const Options &opts, const std::string &modelName, const ir::TensorType &modelInput,
                    const BeforeReading &beforeReading);

} // namespace nnc::cli
