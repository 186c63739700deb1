// The memory a run takes, summed from the kernel program before any of it is
// allocated: the weights as read and as f32, the constants the kernels read (GEMM
// panels packed, the rest plain), the scratch of packing the largest weight, the
// activation arena, the input and the output. An upper bound on the peak (each part
// is counted as if all lived at once). checkMemoryBill refuses a bill over a limit
// with the figures per part and the layer with the most weight bytes named.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/CpuTable.h"
#include "compiler/lower/KernelProgram.h"

namespace nnc::runtime {

struct MemoryBill {
  struct Part {
    std::string what;
    int64_t bytes = 0; // saturates at INT64_MAX
  };
  std::vector<Part> parts;
  int64_t total = 0; // saturates at INT64_MAX
  std::string largestLayer; // the layer (parameter-name prefix) with the most weight bytes
  int64_t largestLayerBytes = 0;
  std::string largestLayerWhere; // "dense, line 2" when the program has its step
};

// weightsFileBytes: the weight file's size (it is read whole), 0 with random weights.
// inputBytes: the input as read (a .npy's data, a raw file), 0 when none. A decoder's
// program (stateFloats > 0) also bills its KV cache, and `step`, the one-position
// program that shares its constants, its own activation arena and output (and the KV
// cache, when `program` is the model run whole, which keeps none).
MemoryBill memoryBill(const lower::KernelProgram& program, const codegen::MicroKernelShape& microKernel,
                      int64_t weightsFileBytes, int64_t inputBytes, const lower::KernelProgram* step = nullptr);

// The memory this machine has available: /proc/meminfo's MemAvailable, else free
// physical pages (sysconf); 0 when neither can be read.
int64_t availableMemoryBytes();

// Throws a UserError (Topic::Memory; DecoderMemory when it bills a KV cache) when
// bill.total > limitBytes; `limitWhat` says
// where the limit comes from ("the limit given", "the memory this machine has available").
void checkMemoryBill(const MemoryBill& bill, const std::string& model, int64_t batch, int64_t limitBytes,
                     const std::string& limitWhat);

} // namespace nnc::runtime
