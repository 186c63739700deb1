// The .npy reader under libFuzzer, read as each dtype an input can be; the beforeData
// hook (where the CLI checks the model) sees only headers the file's size agrees with.
#include <cstdint>

#include "FuzzFile.h"
#include "compiler/support/Error.h"
#include "runtime/io/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nnc;
  nnc_fuzz::MemFile file(data, size);
  for (DType want : {DType::F32, DType::F16, DType::BF16, DType::I32}) {
    try {
      NpyArray a = readNpy(file.path(), want, [&](const NpyHeader& h) {
        if (h.dataOffset > size) __builtin_trap(); // accepted a header past the file
      });
      std::vector<float> v = toFloats(a);
      if (int64_t(v.size()) != a.elementCount()) __builtin_trap();
    } catch (const UserError&) {
    }
  }
  return 0;
}
