// GEMMs whose products take low-precision activations (GemmSpec::activationType;
// docs/lowering.md, "Low-precision activations"): the same function, arguments and
// work split as GemmEmitter.h (a task's panels × row blocks), a simpler loop nest.
//
//   bf16: A is rounded to bf16 (nearest even) and each vdpbf16ps adds, per output
//         lane, the products of two k steps (bf16 × bf16, exact in f32) to an f32
//         accumulator. Weights bf16, packed with kPack 2 (PackLayout.h).
//   i8:   each row of A is quantised on the fly, symmetric: s_a = max|a| / 127,
//         q_a = round-to-even(a · 127 / max|a|) (0 for a row of zeros), stored as
//         q_a + 128 (unsigned, as vpdpbusd wants); each vpdpbusd adds four k steps'
//         u8 × s8 products to an i32 accumulator (exact). The epilogue takes away the
//         channel's 128 · Σq (PackLayout.h: sums) and scales by s_a · s_w in f32.
//         Byte pairs (bytePairProducts): q_a stored signed, then |q_a|, no 128 · Σq;
//         row blocks of 4 rows (kernelShapeFor).
//         Weights i8 (per channel or per tensor), packed with kPack 4.
//   i8 × i4: the same rows of A, stored q_a (signed: vpdpbusd's second operand), with
//         each scale group's Σq_a; the weights' nibbles hold q_w + 8 (unsigned, its
//         first operand: a mask takes a k step's low vector, a shift and a mask the
//         high one; with vpdpbusd, blocks of few rows take the whole bytes, lo + 16·hi,
//         whose sums less the low vector's are 16 × the high nibbles'), so a group's
//         i32 sums are Σ q_a·q_w + 8·Σq_a. At each group's end the kernel takes away
//         8·Σq_a, converts, and adds the sums × the channel's group scale to f32
//         accumulators; the epilogue scales by s_a. Groups a multiple of 16 k steps
//         (4 unrolled dot steps); row blocks of MR / 2 rows (kernelShapeFor), whose two
//         sets of accumulators (i32 of the group, f32 of the row) fit the registers.
//         On AMX tiles, other steps (below).
//   digit products, f32 activations × i8 or i4 weights (GemmEmitter.h:
//         usesDigitProducts): the i8 kernels with each row of A cut into three byte
//         rows, X = roundeven(a / s) of 24 bits = d2·65536 + d1·256 + d0, three vpdpbusd
//         per dot step, row and vector into three i32 sums. i4: s = s_g of each scale
//         group, max|a| / (127·65536) over its k steps; signed digits (d0, d1 in
//         [-128, 127]); the sums start each group at −8·Σd, and at its end
//         65536·T2 + (256·T1 + T0), converted, × group scale × s_g, goes to the f32
//         sums. i8: s of the whole row; the digits of X + 2^23, unsigned (the top one
//         d2 + 128, which the layout's 128·Σq takes away); 65536·(T2 − 128·Σq) +
//         256·T1 + T0 in f32, × s_w · s, in the epilogue. Row blocks of MR / 4 rows.
//         Exact products; the activations' rounding is s / 2, f32's where a group's
//         (i8: a row's) values are alike (docs/lowering.md, "Digit products").
// Then the usual epilogue (bias, activation, residual) in f32.
//
// AMX (usesTiles: a host with AMX tiles, on the AVX-512 row): the same converted rows
// and packed panels, multiplied a tile at a time. A tile is 16 rows × 64 bytes; one
// k step of a panel (PackLayout.h, kPack 2 / 4) is NR·4 bytes, so 16 of them hold, for
// 16 channels, exactly the B operand tdpbf16ps / tdpbusd want (per row, each
// channel's kPack k steps together): 16 steps × 16 channels is one tile load at row
// stride NR·4 bytes. Row blocks are 16 rows (kTileRows, GemmPlan::rowBlockRows); a
// block of two of them × the NR / 16 column tiles of a panel keeps 2 A + 2 B + 4 C
// tiles (all 8) over the K loop, 32 k (bf16) / 64 k (i8) per step, then a last step
// of fewer k (smaller tiles) when K needs it. The C tiles go to the scratch (tileSums) and
// from there through the same epilogue. The tdp instructions sum in their own order:
// results agree with the vector kernels' within f32 rounding, not bit for bit.
// i4 weights under i8 activations (beyond decode rows): per scale group, the group's
// nibbles split into signed bytes, tdpbssd over the group, the i32 sums × the group
// scales into f32 sums (docs/lowering.md, "AMX tiles"). Digit products the same ways,
// each row's three digit rows as three rows of A: one row block's 48 digit rows are
// three tiles (tdpbusd over i8 weights, tdpbssd per group over i4), the sums combined as
// in the vector kernel, whose bits they give.
//
// Loop nest, K always whole: for each chunk of the task's row blocks, its rows of A
// are converted once into the kernel's scratch (dotScratchBytes; at most
// kMaxConvertedBytes, at least one row block), then every panel of the task (at decode rows the full ones two at a time
// where pairsFullPanels says so), then each row block of the chunk: an MR×NR
// register block over K / kPack dot steps (×4 unrolled, accumulator sets for few rows
// as in GemmEmitter.h). A thread that gets only some panels converts the chunk's rows
// itself (M × K work next to M × N × K).
#pragma once
#include <llvm/IR/Function.h>

#include <string>
#include <vector>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

// The converted rows of one chunk: at most this many bytes, twice that with AMX tiles
// (whose products outrun the weights' stream: a chunk of all 64 rows of 64×4096×4096
// reads the weights once, 700 → 1,080 GFLOP/s bf16, 1 thread).
inline constexpr int64_t kMaxConvertedBytes = 512 * 1024;

// k steps a dot instruction sums per lane: 2 (bf16), 4 (i8); 1 for f32 activations.
int64_t dotKPack(DType activations);

// Whether the row multiplies bytes in vpmaddubsw pairs instead of vpdpbusd: the 8-lane
// (AVX2) row on a host without AVX-VNNI. vpmaddubsw adds two u8 × s8 products into a
// saturating i16 and vpmaddwd with ones adds two of those into an i32 lane, which is
// vpdpbusd's sum of four wherever a pair cannot saturate. Under i4 weights the unsigned
// operand is the nibble q_w + 8 ≤ 15 (a pair ≤ 2·15·128 in magnitude), and the kernels
// sum kUnrollSteps pairs in i16 before widening; i8 × i8 multiplies |q_a| by q_w with
// q_a's sign (vpsignb; both in [−127, 127]: a pair ≤ 2·127·127), activations stored
// signed and as |q_a|. Digit products over i8 weights (unsigned digits up to 255) would saturate.
bool bytePairProducts(const CpuFeatures& features, const MicroKernelShape& shape);

// Whether the kernel reads its full weight panels two at a time (two streams from DRAM
// instead of one), with two full panels or more: decode rows (M <= kDecodePrefetchRows)
// of i8 activations over byte pairs, i8 or i4 weights. On Zen 3 (1 thread, M = 1,
// 16384 × 4096 from DRAM, interleaved medians) i8 × i8 read 16.5 GB/s one panel at a time
// and 22.5 two; i4 × i8 23.3 and 24.8. And one row over vpdpbusd on a row of 32 registers
// (AVX-512): i8 activations, and digit products (f32 activations over i8 or i4 weights,
// gated or not), whose pair's 12 digit chains replace one panel's two sets. TinyLlama
// decode, Xeon guest with AMX, 1 thread, tokens/s (docs/lowering.md, "Paired panels at
// one row"): i4 22.8-23.2 → 25.2-26.6, i8 13.3-14.3 → 15.3-16.6, i4 × i8 23.3-24.3 →
// 24.7-25.5, i8 × i8 14.2-14.6 → 15.4-15.8. More rows there keep one panel: three rows
// of i4 × i8 paired took 235 µs against 222 (5632 × 2048, from L3), and digit products'
// chains would not fit; nor do they on 16 registers. The i32 sums are exact: a channel
// gets the same bits either way. The one-row pairs are the host's measured choice
// (MicroKernelShape::pairsOneRowPanels): on the Zen 4 guest they streamed slower, i4
// most (1 thread, 65536 × 4096 i4 from DRAM, µs a call: 6,650-6,920 paired, 4,900-5,410
// one panel at a time; TinyLlama decode, tokens/s: i4 27.6-31.6 → 41.9-43.7, i4 × i8
// 29.0-30.9 → 34.4-36.9; i8 and i8 × i8 alike within the noise).
bool pairsFullPanels(const GemmSpec& spec, const CpuFeatures& features, const MicroKernelShape& shape);
// Whether `spec`'s kernel follows that choice: one row over vpdpbusd on a row of 32
// registers (whose byte products are never pairs), with two full panels or more
// (pairsFullPanels with the choice on). Off, its symbol says so (gemmFunctionName).
bool followsPanelPairingChoice(const GemmSpec& spec, const MicroKernelShape& shape);

// What the host row lacks for `activations` ("" when the kernels can be built): bf16
// needs AVX512_BF16 on the 16-lane (AVX-512) row; i8 AVX512_VNNI on that row, or AVX2
// on the 8-lane one (vpdpbusd with AVX-VNNI, else byte pairs).
std::string missingDotInstructions(DType activations, const CpuFeatures& features, const MicroKernelShape& shape);

// Rows of a tile, the AMX kernels' row blocks; bytes of a tile row.
inline constexpr int64_t kTileRows = 16;
inline constexpr int64_t kTileBytes = 64;

// Whether kernels for `activations` × `weights` use AMX tiles (see above): bf16 with
// AMX-BF16, i8 (i8 or i4 weights) with AMX-INT8, on the AVX-512 row (whose NR is a
// multiple of 16; i4: 32).
bool usesTiles(DType activations, DType weights, const CpuFeatures& features, const MicroKernelShape& shape);
// Whether `spec`'s kernel does: the above, under i4 weights more than decode rows and
// scale groups that whole tile steps cover (at most 64 k steps, or a multiple of 64; K a
// multiple of the group), under i8 weights more than decode rows where they outgrow L2;
// digit products (f32 activations, the digit rows multiplied
// as i8 rows) from kDigitTileMinRows rows: fewer rows took longer on tiles (1 thread,
// i4, M × 5632 × 2048: M = 4 866 µs against 569 on vectors, 7 961-1,020 against
// 951-961, 8 1,016 against 1,383).
inline constexpr int64_t kDigitTileMinRows = 8;
// However long K is: a tile block's converted rows (kTileRows rows over the whole of K,
// 3 digit rows each for digit products) lie in the kernel's scratch, not on its stack
// (dotScratchBytes). examples/seeds/image_linear.nn (K = 150,528) at batch 32 with i8
// weights took 4.6× as long on the vector kernels (308 against 67 ms, side by side on a
// busy machine; 56-57 ms on tiles when quiet).
bool usesTiles(const GemmSpec& spec, const CpuFeatures& features, const MicroKernelShape& shape);

// The instruction the GEMM products use for `activations` × `weights` on this host and
// row (integer weights under i8 activations: for more than decode rows, or weights in
// L2), for reports: "f32 FMA", "vdpbf16ps", "vpdpbusd",
// "vpmaddubsw pairs", "AMX tdpbf16ps", "AMX tdpbusd", "AMX tdpbssd" (i4 weights).
std::string productInstruction(DType activations, DType weights, const CpuFeatures& features,
                               const MicroKernelShape& shape);

// The values the kernel multiplies by for A[M][K] (row-major) with `activations`, as
// f32: each a rounded to bf16, or q_a · s_a of its row (the f32 arithmetic above; a
// row holding a NaN has a NaN scale: every value NaN); f32: A. For references (tests,
// --compare-dtypes' own checks).
std::vector<float> storedActivationValues(DType activations, const float* A, int64_t M, int64_t K);

// Emits the body of `fn` (GemmKernelFn's signature, arguments named) for a spec with
// activationType bf16 or i8 (weights i8 or i4), or digit products (f32 × i4 on a row
// with them), `shape` from kernelShapeFor. Throws std::invalid_argument when the row lacks the
// instructions (missingDotInstructions).
void emitDotGemm(llvm::Function* fn, const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features);
// The bytes of the caller's aPack buffer (GemmKernelFn) that kernel takes as scratch:
// the chunk's converted rows of A, their scales and group sums, a panel's unpacked
// nibbles, the AMX tiles' sums (GemmPlan::scratchBytes). Nothing large is left on the
// kernel's stack.
int64_t dotScratchBytes(const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features);

} // namespace nnc::codegen
