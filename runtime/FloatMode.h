// The floating-point mode kernels run in: the SSE/AVX control register (MXCSR) of the
// thread that runs them.
//
// Subnormal f32 values (below 2^-126 ≈ 1.2e-38 in magnitude) take a microcode assist
// on x86 cores for every instruction that reads or makes one, some hundred cycles where
// a multiply-add takes one: a net whose activations fade towards zero (random weights,
// a deep stack without norms) ran 23x slower once they reached the subnormal range
// (docs/api.md, "Floating-point mode"; docs/bench.md, "Subnormal values"). So a run
// flushes them to zero by default, as TensorFlow and XLA do (FTZ: results that would be
// subnormal are ±0; DAZ: subnormal inputs are read as ±0); Denormals::Keep computes with
// them (IEEE gradual underflow, PyTorch's default). bf16 products (vdpbf16ps, AMX's
// tdpbf16ps) flush them whatever the register says.
//
// A run sets the whole register, not just the two bits: every exception masked and
// rounding to nearest even, so that a host application's own mode (round toward zero,
// an unmasked exception) changes neither the results nor whether the kernels trap; the
// caller's register comes back when the run returns. The thread pool's workers take
// the mode of the thread that hands them a job (ThreadPool.h); weights are prepared in
// the Keep mode whichever thread prepares them (CompiledModel::buildConstant).
#pragma once
#include <cstdint>

namespace nnc::runtime {

enum class Denormals { Flush, Keep };
inline const char *denormalsName(Denormals d) { return d == Denormals::Flush ? "flush" : "keep"; }

// The calling thread's MXCSR (0 on targets without one).
uint32_t floatMode();
// Sets the calling thread's MXCSR (nothing on targets without one).
void setFloatMode(uint32_t mode);
// The MXCSR a run computes in: exceptions masked, round to nearest even, and FTZ and
// DAZ with Denormals::Flush.
uint32_t runFloatMode(Denormals denormals);

// For its life, the calling thread computes in runFloatMode(denormals); then in the
// mode it had before.
class ScopedFloatMode {
public:
  explicit ScopedFloatMode(Denormals denormals);
  ~ScopedFloatMode();
  ScopedFloatMode(const ScopedFloatMode &) = delete;
  ScopedFloatMode &operator=(const ScopedFloatMode &) = delete;

private:
  uint32_t saved_;
};

} // namespace nnc::runtime
