// The C++ face of compiled kernels: Gemm (one dense layer) with its PackedWeights,
// and Elementwise (activation / softmax / add over rows).
//
// Gemm guarantees: pack() is done once per weight tensor (at load) into the layout of
// codegen/PackLayout.h for this engine's micro-kernel; run() never repacks or
// allocates, and with a pool splits the N panels across its threads (each output
// element is written by exactly one thread; results are bit-identical for any thread
// count). run() throws std::invalid_argument when the weights were packed for another
// shape or a required pointer (bias/residual per the spec) is null.
// The Gemm and Elementwise objects hold raw kernel addresses: they must not outlive
// the JitEngine that compiled them.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "compiler/codegen/ElementwiseEmitter.h"
#include "compiler/codegen/GemmEmitter.h"
#include "compiler/codegen/PackLayout.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/JitEngine.h"

namespace nnc::runtime {

// 64-byte aligned storage in the kernel's panel layout.
class PackedWeights {
public:
  PackedWeights() = default;
  const float* data() const { return data_.get(); }
  const codegen::PanelLayout& layout() const { return layout_; }
  int64_t bytes() const { return layout_.totalElements() * int64_t(sizeof(float)); }

private:
  friend class Gemm;
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, FreeDeleter> data_;
  codegen::PanelLayout layout_{0, 0, 1};
};

class Gemm {
public:
  Gemm(JitEngine& engine, const codegen::GemmSpec& spec); // compiles (or reuses) the kernel
  const codegen::GemmSpec& spec() const { return spec_; }

  PackedWeights pack(const float* W /* [N][K] row-major, PyTorch layout */) const;
  void run(const float* A, const PackedWeights& B, const float* bias, const float* residual,
           float* C, ThreadPool* pool = nullptr) const;

private:
  codegen::GemmSpec spec_;
  codegen::PanelLayout layout_;
  codegen::GemmKernelFn kernel_;
};

class Elementwise {
public:
  Elementwise(JitEngine& engine, const codegen::ElementwiseSpec& spec);
  const codegen::ElementwiseSpec& spec() const { return spec_; }
  // y is read only for Add. Rows are split across the pool's threads.
  void run(const float* x, const float* y, float* out, ThreadPool* pool = nullptr) const;

private:
  codegen::ElementwiseSpec spec_;
  codegen::ElementwiseKernelFn kernel_;
};

} // namespace nnc::runtime
