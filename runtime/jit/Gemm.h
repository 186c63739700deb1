// The C++ face of compiled kernels: Gemm (one dense layer) with its PackedWeights,
// and Elementwise (activation / softmax / add over rows).
//
// Gemm guarantees: pack() is done once per weight tensor (at load) into the layout of
// codegen/PackLayout.h for this engine's micro-kernel; run() never repacks or
// allocates, and with a pool cuts the call into tasks along N panels and M row blocks
// (chooseGemmSplit: never below kMinMacsPerTask each; each output element is written
// by exactly one task; results are bit-identical for any thread count). run() throws
// std::invalid_argument when the weights were packed for another shape or a required
// pointer (bias/residual per the spec) is null. The residual may be C itself (or
// overlap it), with any K blocking (see aliasSafeKernel_).
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

// 64-byte aligned storage in the kernel's panel layout, in its storage dtype
// (layout().type; scales after the weights for i8/i4: PackLayout.h).
class PackedWeights {
public:
  PackedWeights() = default;
  const float* data() const { return data_.get(); }
  const codegen::PanelLayout& layout() const { return layout_; }
  int64_t bytes() const { return layout_.totalBytes(); }
  // The same bytes in new storage (bench/ streams distinct copies from DRAM).
  PackedWeights copy() const;
  // Weights already packed in `layout` at `bytes` (64-byte aligned, never written),
  // which `owner` keeps alive (a weight cache entry, runtime/model/WeightCache.h).
  static PackedWeights view(const codegen::PanelLayout& layout, const void* bytes, std::shared_ptr<const void> owner);

private:
  friend class Gemm;
  static std::shared_ptr<float> allocate(int64_t bytes);
  std::shared_ptr<float> data_; // owned (allocatePacked) or a view
  std::shared_ptr<const void> rows_; // layout().rowPointers: what keeps the rows alive
  codegen::PanelLayout layout_{0, 0, 1};
};

// Splitting: a task must carry enough multiply-accumulates to pay for handing it to
// another thread. Measured on 2 Zen 4 cores with the spinning pool: a 2-way split pays
// from ~128 K MACs in all (64³, batch-1 784→256: 1.6-1.9× faster), while 32³-48³
// (33-110 K) run best inline; below 64 K per task the hand-off costs more than it saves.
inline constexpr int64_t kMinMacsPerTask = 64 * 1024;
// Up to this many tasks per thread, claimed dynamically: when a worker is slow to
// start (its core is busy with another process) the caller takes over all but the
// task the worker is on, instead of waiting for half of the call.
inline constexpr int kTasksPerThread = 4;

// rowParts × panelParts tasks: row blocks and panels cut into near-equal ranges.
struct GemmSplit {
  int64_t rowParts = 1, panelParts = 1;
  int64_t tasks() const { return rowParts * panelParts; }
};

// The split run() uses on `threads` threads: up to kTasksPerThread tasks per thread, a
// multiple of `threads` (fewer when a task would get < kMinMacsPerTask MACs; one per
// thread for a K-blocked kernel, whose tasks each pack their rows of A; 1 means
// run inline), cut so the largest task does the least padded work (whole row blocks ×
// whole panels); on a tie, split the larger of A (M) and W (N) more.
GemmSplit chooseGemmSplit(const codegen::GemmSpec& spec, const codegen::GemmPlan& plan,
                          int threads);

class Gemm {
public:
  Gemm(JitEngine& engine, const codegen::GemmSpec& spec); // compiles (or reuses) the kernel
  const codegen::GemmSpec& spec() const { return spec_; }

  // Rounds or quantises W to spec().weightType (PackLayout.h); codegen::UnstorableWeight when a
  // weight cannot be stored (f16 beyond ±65504, NaN, inf), naming the element.
  PackedWeights pack(const float* W /* [N][K] row-major, PyTorch layout */,
                     const codegen::PackOptions& quant = {}) const;
  // The same for W given by its N row pointers (codegen::packWeightRows).
  // Weights in place (spec().weightRows): both copy W's rows into storage of their own
  // and make the table of row pointers into it (referRows makes it without a copy).
  PackedWeights packRows(const float* const* rows, const codegen::PackOptions& quant = {}) const;
  // Weights in place: the table of W's N rows where they lie, which `owner` keeps
  // alive (the mapped weights file); nothing is copied.
  PackedWeights referRows(const float* const* rows, std::shared_ptr<const void> owner) const;
  void run(const float* A, const PackedWeights& B, const float* bias, const float* residual,
           float* C, ThreadPool* pool = nullptr) const {
    // The common case (valid arguments, no pool, no aliasing concern) inline: a 16³
    // call is ~72 ns of kernel, and the out-of-line path added ~4 ns to it.
    if (!pool && !aliasSafeKernel_ && plan_.scratchBytes == 0 && accepts(B, bias, residual))
      return kernel_(A, B.data(), bias, residual, C, nullptr, 0, plan_.panels, 0, plan_.rowBlocks);
    runChecked(A, B, bias, residual, C, pool);
  }
  // run() with a given split instead of chooseGemmSplit's (clipped to the plan's row
  // blocks and panels); for tests of every split.
  void runSplit(const float* A, const PackedWeights& B, const float* bias,
                const float* residual, float* C, ThreadPool* pool, GemmSplit split) const;
  // Row blocks [rowBlockBegin, rowBlockEnd) only (all panels), split over the pool's
  // threads by row blocks when there are >= 4 per thread, else as run() would split a
  // GEMM of those rows: A is read only in those rows (a conv's chunk of im2col rows).
  void runRowBlocks(const float* A, const PackedWeights& B, const float* bias, const float* residual, float* C,
                    int64_t rowBlockBegin, int64_t rowBlockEnd, ThreadPool* pool) const;
  const codegen::GemmPlan& plan() const { return plan_; }
  const codegen::PanelLayout& layout() const { return layout_; } // what pack() makes

private:
  // The arguments this kernel can run on; check() throws, saying which one is wrong.
  bool accepts(const PackedWeights& B, const float* bias, const float* residual) const {
    return B.data() && B.layout() == layout_ && (bias || !spec_.bias) && (residual || !spec_.residual);
  }
  void check(const PackedWeights& B, const float* bias, const float* residual) const;
  void runChecked(const float* A, const PackedWeights& B, const float* bias, const float* residual,
                  float* C, ThreadPool* pool) const;
  // The split's tasks over row blocks [rowBlockBegin, rowBlockEnd) (clipped to them and
  // to the panels), on the pool or inline.
  void runTasks(const float* A, const PackedWeights& B, const float* bias, const float* residual, float* C,
                ThreadPool* pool, GemmSplit split, int64_t rowBlockBegin, int64_t rowBlockEnd) const;

  codegen::GemmSpec spec_;
  codegen::PanelLayout layout_;
  codegen::GemmPlan plan_;
  codegen::GemmKernelFn kernel_;
  // A K-blocked kernel keeps partial sums in C, so with an activation it reads the
  // residual only in its last K block: for a residual that overlaps C, run() uses this
  // one-K-block variant instead (compiled only for such specs; null otherwise).
  codegen::GemmKernelFn aliasSafeKernel_ = nullptr;
  codegen::GemmKernelFn kernelFor(const float* residual, const float* C) const;
};

class Elementwise {
public:
  Elementwise(JitEngine& engine, const codegen::ElementwiseSpec& spec);
  const codegen::ElementwiseSpec& spec() const { return spec_; }
  // y is read by Add, GatedProduct and AddPositions (from the table's row `past` on:
  // a decoder's later positions). Rows are split across the pool's threads.
  void run(const float* x, const float* y, float* out, ThreadPool* pool = nullptr, int64_t past = 0) const;

private:
  codegen::ElementwiseSpec spec_;
  codegen::ElementwiseKernelFn kernel_;
};

} // namespace nnc::runtime
