#include "runtime/io/TensorFiles.h"

#include "runtime/io/FileBytes.h"

namespace nnc {

NpyArray readInputFile(const std::string& path, DType dtype, int64_t rawElements) {
  if (hasExtension(path, ".npy")) return readNpy(path, dtype);
  return NpyArray{{rawElements}, dtype, readRawInput(path, rawElements, dtype)};
}

void writeArrayFile(const std::string& path, const NpyArray& array) {
  if (hasExtension(path, ".npy"))
    writeNpy(path, array);
  else
    writeFileBytes(path, "output file", array.data.data(), array.data.size());
}

void writeOutputFile(const std::string& path, const std::vector<int64_t>& shape,
                     const std::vector<float>& values) {
  writeArrayFile(path, makeF32Array(shape, values)); // makeF32Array checks values against shape
}

} // namespace nnc
