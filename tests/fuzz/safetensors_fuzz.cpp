// The .safetensors reader under libFuzzer: open a file of these bytes (from disk, so
// the header-length checks against the file's size run too), read every float
// tensor. Only UserError may leave it.
#include <cstdint>
#include <vector>

#include "FuzzFile.h"
#include "compiler/support/Error.h"
#include "runtime/io/SafeTensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nnc;
  nnc_fuzz::MemFile file(data, size);
  try {
    SafeTensorsFile f = SafeTensorsFile::open(file.path());
    for (const std::string& name : f.names()) {
      const TensorInfo& t = f.info(name);
      if (t.floatDType) {
        std::vector<float> v = f.readF32(name);
        if (int64_t(v.size()) != t.elementCount()) __builtin_trap();
      }
    }
    (void)f.metadata();
  } catch (const UserError&) {
  }
  return 0;
}
