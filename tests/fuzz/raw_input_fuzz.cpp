// Raw inputs under libFuzzer: the first two bytes choose the expected element count
// (0..4095) and dtype, the rest is the file, read through readInputFile as the CLI
// does (".bin": raw). Only a RawInputSizeError (a UserError) may leave it.
#include <cstdint>

#include "FuzzFile.h"
#include "compiler/support/Error.h"
#include "runtime/io/TensorFiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nnc;
  if (size < 2) return 0;
  const int64_t expected = (int64_t(data[0]) | int64_t(data[1]) << 8) & 0xfff;
  const DType dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32};
  const DType dtype = dtypes[data[1] >> 6];
  nnc_fuzz::MemFile file(data + 2, size - 2);
  try {
    NpyArray a = readInputFile(file.path(), dtype, expected);
    if (int64_t(a.data.size()) != bytesFor(expected, dtype) || size - 2 != a.data.size()) __builtin_trap();
    (void)toFloats(a);
  } catch (const UserError&) {
  }
  return 0;
}
