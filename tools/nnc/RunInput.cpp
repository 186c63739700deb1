#include "RunInput.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "compiler/support/Error.h"
#include "runtime/io/FileBytes.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorFiles.h"

namespace nnc::cli {

// Token models read int32 ids (an int64 .npy is converted, range-checked), the others f32.
InputData readInput(const Options &opts, const std::string &modelName, const ir::TensorType &modelInput,
                    const BeforeReading &beforeReading) {
  const bool tokens = modelInput.dtype == DType::I32;
  if (modelInput.dtype != DType::F32 && !tokens)
    throw UserError(fmt::format("{}: models with {} inputs cannot run yet", opts.file, dtypeName(modelInput.dtype)));
  const DType want = tokens ? DType::I32 : DType::F32;
  std::vector<int64_t> perExample(modelInput.shape.begin() + 1, modelInput.shape.end());
  int64_t perExampleCount = 1;
  for (int64_t d : perExample) perExampleCount *= d;
  InputData in;
  if (hasExtension(opts.runInput, ".npy")) {
    // The header's shape is checked against the model before the data is read.
    NpyArray a = readNpy(opts.runInput, want, [&](const NpyHeader &header) {
      const std::vector<int64_t> &shape = header.shape;
      if (shape == perExample) {
        in.batch = 1;
      } else if (shape.size() == perExample.size() + 1 &&
                 std::equal(perExample.begin(), perExample.end(), shape.begin() + 1) && shape[0] >= 1) {
        in.batch = shape[0];
      } else if (shape.size() == perExample.size() + 1 &&
                 std::equal(perExample.begin(), perExample.end(), shape.begin() + 1)) {
        throw UserError(fmt::format("{}: input shape [{}] holds no example (a batch of 0); model '{}' runs a batch "
                                    "of at least 1",
                                    opts.runInput, fmt::join(shape, ", "), modelName));
      } else {
        throw UserError(fmt::format("{}: input shape [{}] does not fit model '{}': expected [batch, {}] or [{}]",
                                    opts.runInput, fmt::join(shape, ", "), modelName, fmt::join(perExample, ", "),
                                    fmt::join(perExample, ", ")));
      }
      // An explicit --batch (or --set batch=) that the file contradicts is an error, not
      // dropped: the model may size layers by `batch`, and the user meant one of the two.
      if (auto given = opts.sets.find("batch"); given != opts.sets.end() && given->second != in.batch)
        throw UserError(fmt::format("{}: the file holds a batch of {} (shape [{}]), but --batch {} was given; the "
                                    "file's leading axis sets the batch: drop --batch, or give a file of batch {}",
                                    opts.runInput, in.batch, fmt::join(shape, ", "), given->second, given->second));
      // As read (at most 8-byte elements), as f32, as floats; saturated (a pipe's header
      // is not checked against a size).
      int64_t inputBytes = 0;
      if (__builtin_mul_overflow(in.batch, perExampleCount, &inputBytes) ||
          __builtin_mul_overflow(inputBytes, int64_t(16), &inputBytes))
        inputBytes = INT64_MAX;
      beforeReading(in.batch, inputBytes);
    });
    if (tokens) {
      in.values.resize(size_t(a.elementCount()));
      std::memcpy(in.values.data(), a.data.data(), in.values.size() * sizeof(int32_t));
    } else {
      in.values = toFloats(a);
    }
    return in;
  }
  int64_t batch = modelInput.shape[0];
  int64_t rawBytes = 0; // as read, as floats
  if (__builtin_mul_overflow(batch * perExampleCount, int64_t(8), &rawBytes)) rawBytes = INT64_MAX;
  beforeReading(0, rawBytes);
  try {
    auto bytes = readRawInput(opts.runInput, batch * perExampleCount, want);
    in.values.resize(bytes.size() / sizeof(float));
    std::memcpy(in.values.data(), bytes.data(), bytes.size());
  } catch (const RawInputSizeError &e) {
    std::string fit = e.foundBytes == 0 ? "; the file is empty"
                      : e.wholeElements && e.foundElements % perExampleCount == 0 && e.foundElements > 0
                          ? fmt::format("; that is a batch of {} (use --batch {})", e.foundElements / perExampleCount,
                                        e.foundElements / perExampleCount)
                          : fmt::format("; no batch fits: it is not a multiple of {} elements", perExampleCount);
    throw UserError(fmt::format("{}: raw input has {} bytes ({} {} elements), expected batch {} × {} = {} elements "
                                "({} bytes){}",
                                opts.runInput, e.foundBytes, e.foundElements, dtypeName(want), batch, perExampleCount,
                                batch * perExampleCount, batch * perExampleCount * 4, fit));
  }
  return in;
}

} // namespace nnc::cli
