// The kernel program: what the runtime executes, as plain data (Glow's low-level IR is
// the model). The lowering stage (Lower.h) builds it from the checked, rewritten IR,
// one rule per op kind (compiler/ops/OpTable.h); the runtime interprets it and knows
// nothing of layer kinds; `nnc --emit plan` prints it (ProgramPrinter.h).
//
//  - buffers: every activation (the model's input and output included) and every
//    step's scratch, with its size; a view shares its base buffer's storage. The
//    planner (BufferPlan.h) gives each an arena offset from the steps' liveness.
//  - constants: what the kernels read that does not change between calls, each with
//    its weight recipe: which file tensors (PyTorch names) and what happens to them at
//    load (fold a linear chain, pack into a GEMM's panel layout).
//  - steps: in order, one kernel each (codegen::KernelSpec) and its operands in the
//    kernel family's order (KernelOperands below).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/KernelSpec.h"
#include "compiler/ir/Ir.h"

namespace nnc::lower {

using BufferId = int32_t;
using ConstantId = int32_t;

struct Buffer {
  // State: kept between calls, outside the arena (a decoder's KV cache: the steps of
  // every call append to it and read it; a program of another sequence length over the
  // same model has the same state buffers, in the same order, so they can share it).
  enum class Role : uint8_t { Input, Activation, Scratch, State };
  std::string name;     // the value it holds: the layer's path, "scratch of <layer>", "kv cache of <layer>"
  Role role = Role::Activation;
  int64_t elements = 0; // 4-byte elements (f32 activations, i32 token ids)
  std::vector<int64_t> shape; // batch axis included; scratch: {elements}
  BufferId viewOf = -1; // a view: the same storage as that buffer (never a view of a view)
  // Filled by planBuffers (BufferPlan.h):
  int64_t offset = -1;   // in floats from the arena's start (views: their base's; State: the state's start)
  int32_t firstStep = -1, lastStep = -1; // live range over steps (base buffers; -1: unused)
};

// A constant: one tensor the kernels read, made once when the weights load.
struct WeightRecipe {
  enum class Source : uint8_t {
    Tensor,       // the file tensor tensors[0], as it is
    FoldedWeight, // W = W_k · … · W_0 of the dense chain tensors[i] = "<layer>" (FoldLinearChains)
    FoldedBias,   // b of that chain: W_k · (… (W_1 · b_0 + b_1) …) + b_k (missing biases are 0)
    // A batchnorm folded into the conv or dense before it (FuseEpilogues), tensors =
    // {"<layer>", "<batchnorm>"}, with s = γ / sqrt(var + eps) per output channel (in f64):
    NormFoldedWeight, // W'[o, …] = W[o, …] · s[o]
    NormFoldedBias,   // b'[o] = (b[o] − mean[o]) · s[o] + β[o] (b = 0 when the layer has none)
    // A batchnorm run on its own as a per-channel scale and shift, tensors = {"<batchnorm>"}:
    NormScale, // s = γ / sqrt(var + eps)
    NormShift, // β − mean · s
    Concat,    // the tensors' rows one after another (attention's q, k, v as one GEMM)
    RopeTable, // no tensor: [positions, headDim] of cos (first half) and sin (second half)
               // at position p and frequency i of theta^(−2i/headDim), as Hugging Face
               // computes them in f32 (RopeSpec in KernelSpec.h)
  };
  std::string name;                 // for the plan: "fc1.weight", "fc2.weight (folded)"
  Source source = Source::Tensor;
  std::vector<std::string> tensors; // Tensor: the tensor's name; Folded*: the layers' paths
  std::vector<int64_t> shape;       // the constant's logical shape (PyTorch layout)
  // Rows [rowBegin, rowBegin + shape[0]) of what the source makes (a grouped conv's
  // group: its output channels' weights or biases); 0 and the whole tensor otherwise.
  int64_t rowBegin = 0;
  // > 1: a conv's [out, cg·kernelTaps] weight with its columns reordered from PyTorch's
  // (channel, tap) to (tap, channel), for a GEMM over channels-last im2col rows
  // (LayoutSpec::PixelsIm2col); taps = kh·kw.
  int64_t kernelTaps = 1;
  // The [rows, cols] constant stored transposed, [cols, rows] (an NHWC depthwise conv's
  // weights: a tap's row holds every channel's weight; DepthwiseSpec::pixels).
  bool transposed = false;
  double eps = 0; // Norm* sources: the batchnorm's eps
  double ropeTheta = 0; // RopeTable: the base
  DType storage = DType::F32;       // dtype the kernel reads it in
  // Packed into this GEMM's panel layout (PackLayout.h); otherwise plain row-major f32.
  std::optional<codegen::GemmSpec> packFor;
};

// How GEMM weights stored as i8 or i4 are quantised (PackLayout.h; --quant,
// --quant-group): i8 one scale per output channel, or one per tensor; i4 one per
// channel per `group` steps along K.
// `activations` (--activations): bf16 or i8 makes every GEMM whose weights are stored
// in that dtype take its activations in it too (docs/lowering.md, "Low-precision
// activations"); f32 (the default) keeps them f32 everywhere.
struct Quantisation {
  bool perTensor = false;
  int64_t group = 32;
  DType activations = DType::F32;
  // --weights-in-place: f32 weights whose GEMM reads W's rows as stored (dense layers,
  // attention's projections, gated MLPs; not convs) are read where they lie — the mapped
  // weights file — through a table of row pointers instead of being packed
  // (docs/lowering.md, "Weights in place").
  bool weightsInPlace = false;
};

struct Operand {
  enum class Kind : uint8_t { None, Buffer, Constant };
  Kind kind = Kind::None;
  int32_t id = -1;
  static Operand none() { return {}; }
  static Operand buffer(BufferId b) { return {Kind::Buffer, b}; }
  static Operand constant(ConstantId c) { return {Kind::Constant, c}; }
};

// Operand order per kernel family (what the runtime passes to the kernel):
//   GemmSpec:        A, B (constant: packed weights), bias, residual, C
//   ElementwiseSpec: x, y (Add only), out
//   NormSpec:        x, gamma, beta (when shift), out
//   PoolSpec:        x, out
//   LayoutSpec:      x, residual, out
//   ConvGemmSpec:    x, B (packed), bias, residual, scratch (a chunk of A), C
//   DepthwiseSpec:   x, W, bias, residual, out
//   ChannelSpec:     x, scale, shift, out
//   GatherSpec:      ids, table, out
//   RopeSpec:        x, table (constant: RopeTable), out (the same buffer as x: in place)
//   AttentionSpec:   q, k, v (buffers, maybe one: the spec's columns say where), scratch, out
//   KvAppendSpec:    x (the q|k|v rows), cache (a State buffer)
//   LastPositionSpec: x, out
//   ArgmaxSpec:      x (the logits), ids (i32, KernelProgram::argmax)
struct Step {
  std::string layer;        // the IR op this step comes from (path), for the plan and errors
  std::string opKind;       // its kind's name ("dense")
  int line = 0;             // its statement's line in the source
  std::optional<codegen::KernelSpec> kernel; // none: the layer cannot run yet (see why)
  enum class Blocker : uint8_t { None, NoKernelYet, StorageDType };
  Blocker blocker = Blocker::None;
  std::string whyNotRunnable; // "stores its weights as f16, …" (follows "layer 'x' (dense, line 3) ")
  std::vector<Operand> operands;
};

struct KernelProgram {
  std::string model;
  int64_t batch = 1;
  std::vector<Buffer> buffers;
  std::vector<WeightRecipe> constants;
  std::vector<Step> steps;
  std::vector<ir::ParamTensor> tensors; // every file tensor the recipes read, with shape
  // A tied dense's own weight as PyTorch names it ("lm_head.weight") → the embedding
  // table it reads ("wte.weight"): a file may hold either name, or both when equal.
  std::map<std::string, std::string> tiedTensors;
  BufferId input = -1, output = -1;
  Quantisation quant; // of every i8 / i4 weight
  ir::TensorType inputType, outputType; // batch axis included
  int64_t arenaFloats = 0; // planBuffers: the arena's size
  // A decoder's program (LowerOptions::kvContext > 0): the state buffers' total size.
  int64_t kvContext = 0;
  int64_t stateFloats = 0;
  DType kvType = DType::F32; // how the KV cache stores keys and values (--kv-dtype)
  // A decoder's program for greedy decoding (Lower.h: argmax): the Argmax step's i32
  // ids, one per row of the output's logits, live after the run like the output
  // (CompiledModel::argmaxIds); -1 otherwise.
  BufferId argmax = -1;

  int64_t arenaBytes() const { return arenaFloats * 4; }
  // The first step no kernel can run yet, or null.
  const Step *firstNotRunnable() const {
    for (const auto &s : steps)
      if (!s.kernel) return &s;
    return nullptr;
  }
};

} // namespace nnc::lower
