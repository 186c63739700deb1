// Model inputs and outputs on disk, chosen by file extension (docs/cli.md, inputs and outputs):
// a path ending in .npy (any case) is a NumPy array; anything else is raw
// little-endian data with no header.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/io/Npy.h"

namespace nnc {

// Reads an input as `dtype`. A .npy keeps the shape in the file (the caller checks it
// against the model); raw data must hold exactly `rawElements` elements and gets the
// shape {rawElements}, else RawInputSizeError.
NpyArray readInputFile(const std::string& path, DType dtype, int64_t rawElements);

// Writes an array: a .npy with its shape and dtype, or its raw little-endian values.
void writeArrayFile(const std::string& path, const NpyArray& array);
// Writes an f32 output: a .npy with `shape`, or raw f32 values.
void writeOutputFile(const std::string& path, const std::vector<int64_t>& shape,
                     const std::vector<float>& values);

} // namespace nnc
