// The plan of a GEMM kernel, before any code: which specs the emitter builds
// (validateGemmSpec), the register block (kernelShapeFor), the kernel family (f32, or
// DotGemmEmitter's dot products), the cache blocks of the loop nest (gemmBlocking), the
// packed-weights layout (gemmPanelLayout), and the units the runtime splits work along
// (planGemm). GemmEmitter.h emits the code these choose; the machine facts are the
// MicroKernelShape fields and the host's caches (CpuTable.h).
#pragma once
#include <cstdint>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"
#include "compiler/codegen/PackLayout.h"

namespace nnc::codegen {

// FMAs in flight needed to cover FMA latency × FMA pipes (4 cycles × 2 on Zen/Haswell).
inline constexpr int kMinFmaChains = 8;

// Decode-shaped blocks (at most kDecodePrefetchRows rows) stream low-precision weights
// from DRAM once and prefetch them in software (GemmEmitter.cpp prefetchB,
// DotGemmEmitter.cpp prefetchSteps); i4's group scales, a stream of their own (NR
// floats a group per panel), kScalePrefetchBytes (8 groups) ahead. Measured: the
// comments there and docs/bench.md, "Storage dtypes".
inline constexpr int64_t kDecodePrefetchRows = 3;
// Which of the host's two measured prefetch choices a GEMM's code follows, if any
// (MicroKernelShape::prefetchesStreamedWeights; below).
enum class StreamPrefetchClass { None, Widened, Dot };
inline StreamPrefetchClass streamPrefetchClass(const GemmSpec& spec, const MicroKernelShape& shape);
inline bool prefetchChoiceApplies(const GemmSpec& spec, const MicroKernelShape& shape) {
  return streamPrefetchClass(spec, shape) != StreamPrefetchClass::None;
}
inline constexpr int64_t kScalePrefetchBytes = 1024;

// The register block a GEMM uses: the row's, except for exactly two panels of columns
// (N = 2·NR: ResNet's 64-channel layers on the avx512 row's 12×32) over many rows, which
// take (MR/2)×(2·NR) blocks: each row's broadcasts then feed both panels (6 broadcasts
// and 4 weight vectors per 24 FMAs instead of 12 and 2, and each A row is read once, not
// once per panel). Measured (1 thread, avx512 row, same binary A/B, ResNet-18 batch 8):
// layer 1's 3×3 convs (M = 25088, N = 64, K = 576) 161-173 → 183-191 GFLOP/s; 7×64
// blocks (28 accumulators) were slower (64³: 166-197 against 214). At 64³ the 6×64
// block measured the same best and a lower median (200-203 against 210-212 GFLOP/s),
// hence the floor on M. One vector of columns over MR + 1 to 16 rows (16³ on the
// avx512 row) takes one block of all M rows (GemmPlan.cpp: kernelShapeFor). i4 weights under i8
// activations take MR/2 rows (byte pairs 4), i8 × i8 byte pairs 4, digit products MR/4
// (DotGemmEmitter.h).
// Every function below takes the row and applies this itself.
inline constexpr int64_t kWideBlockMinRows = 256;
// Copies of one panel's K block in f32 (low-precision weights widened once, weights in
// place transposed), in the kernel's scratch (GemmPlan::scratchBytes): at most this
// many floats (1 MiB, to stay in L2), and the widest panel of any row (6×64 blocks).
inline constexpr int64_t kMaxPanelCopyFloats = 256 * 1024;
inline constexpr int64_t kMaxNR = 64;
// Whether a GEMM can read its weights in place (GemmSpec::weightRows): f32 weights and
// activations, no conv windows, and where K must stay whole (gated; a residual after an
// activation, for runtime::Gemm's alias-safe variant) its panel copy within
// kMaxPanelCopyFloats at any row's NR.
bool weightRowsSupported(const GemmSpec& spec);
// i4 weights under i8 activations: scale groups a multiple of this many k steps.
inline constexpr int64_t kDotI4GroupMultiple = 16;
// i8 and i4 weights under f32 activations on a row with vpdpbusd (MicroKernelShape::
// digitProducts) multiply in DotGemmEmitter's kernel, the activations as three 8-bit
// digits (DotGemmEmitter.h), in the packed layout of i8 activations (kPack 4): i4 with
// scale groups a multiple of kDotI4GroupMultiple and at most kMaxDigitGroup k steps (a
// group's i32 sums), weights packed (not read in place), no conv windows. On any other
// row, or for any other spec, the f32 kernel widens the weights (GemmEmitter.cpp:
// loadPackedB). Which one a spec gets depends on the host's row only, never on M, so a
// decoder's prompt and step programs share the packed weights.
// i4 also needs K >= kMinDigitI4K: over shorter rows the f32 kernel, which widens each
// panel once for all its row blocks, beat the digits' conversion and group sums at many
// rows (Zen 4, 1 thread, MLP 784→256→128→10 at batch 64: 318 µs against 270; 4096² at
// M = 64 and TinyLlama's prefill, K 2048 and 5632, went the other way). Both also need
// N >= kMinDigitI8N / kMinDigitI4N outputs: each row's digits (three bytes and their
// sums a k step) serve only N outputs, and over fewer the f32 kernel won at many rows
// (Zen 4, 1 thread, µs at M = 360, digits / f32: i8 K 64 N 10 17.3 / 6.6, N 32
// 22.3 / 13.2, N 64 32.6 / 26.5, N 128 53.2 / 54.0; i4 K 1024 N 64 584 / 424, N 128
// 942 / 904, N 256 1637 / 1805; the examples' digits MLP, 64→64→32→10 at batch 360,
// i8 65.7 / 43.4). A weight's K and N, not M, so a decoder's programs still agree.
inline constexpr int64_t kMaxDigitGroup = 2048;
inline constexpr int64_t kMinDigitI4K = 1024;
inline constexpr int64_t kMinDigitI8N = 64;
inline constexpr int64_t kMinDigitI4N = 128;
inline bool usesDigitProducts(const GemmSpec& spec, const MicroKernelShape& shape) {
  if (!shape.digitProducts || spec.activationType != nnc::DType::F32 || spec.windows.c > 0 || spec.weightRows) return false;
  if (spec.weightType == nnc::DType::I8) return !shape.bytePairs && spec.N >= kMinDigitI8N; // pairs would saturate
  return spec.weightType == nnc::DType::I4 && spec.K >= kMinDigitI4K && spec.N >= kMinDigitI4N && spec.quantGroup > 0 &&
         spec.quantGroup % kDotI4GroupMultiple == 0 && spec.quantGroup <= kMaxDigitGroup;
}
// On a row whose byte products are vpmaddubsw pairs (MicroKernelShape::bytePairs), a
// digit product costs more vector instructions than the f32 kernel's share of an FMA
// (three vpmaddubsw and their i16 / i32 sums per 8 × 4 products, against 4 FMAs a row
// that also serve MR rows): from kPairsF32Rows rows the f32 kernel multiplies i4
// weights packed for digit products, widening their nibbles (GemmEmitter.cpp:
// emitKStep), so a decoder's prompt and step programs still share one packed copy.
// Zen 3 guest, 1 thread, 128 × 5632 × 2048: digit products 52 % of the FMA peak, the
// f32 kernel 80 %; at M = 1 the digits stream 2.1× as fast (TinyLlama i4 decode 9.5 →
// 20 tok/s).
inline constexpr int64_t kPairsF32Rows = 4;
inline bool widensDigitLayout(const GemmSpec& spec, const MicroKernelShape& shape) {
  return shape.bytePairs && spec.weightType == nnc::DType::I4 && spec.M >= kPairsF32Rows && usesDigitProducts(spec, shape);
}
// Whether the kernel is DotGemmEmitter's: low-precision activations, or digit products.
inline bool usesDotKernel(const GemmSpec& spec, const MicroKernelShape& shape) {
  return spec.activationType != nnc::DType::F32 || (usesDigitProducts(spec, shape) && !widensDigitLayout(spec, shape));
}
// Dot kernels whose weights take one product instruction a line — bf16 × bf16
// (vdpbf16ps) and i8 × i8 over vpdpbusd, not over byte pairs — leave the weight stream to
// the hardware prefetcher at decode rows too, as the f32 kernel does with its one FMA a
// line (DotGemmEmitter.cpp, prefetchSteps). Xeon guest with AMX, TinyLlama decode,
// tok/s, interleaved: bf16 × bf16 at 1 thread 7.32-7.70 without software prefetch,
// 6.53-6.97 at 4 KiB ahead, 6.85 from two distances; i8 × i8 (six rounds) 12.44-12.89
// without, 12.00-12.53 from two distances at 1 thread, 23.60-24.18 and 22.81-23.89 at 2.
// On the Zen 5 guest i8 × i8 read alike with and without 4 KiB (31-36 GB/s).
inline bool dotWeightsUnprefetched(const GemmSpec& spec, const MicroKernelShape& shape) {
  return spec.activationType != nnc::DType::F32 && spec.activationType == spec.weightType && !shape.bytePairs;
}
// The GEMMs whose code follows MicroKernelShape::prefetchesStreamedWeights, in two
// classes, each measured on its own (runtime/jit/WeightPrefetch.h):
// - Widened: f16 or bf16 weights widened to f32 (f32 activations), and f32 weights read
//   in place at decode rows (GemmSpec::weightRows, M <= kDecodePrefetchRows:
//   GemmEmitter.cpp emitRowsDot).
// - Dot: at decode rows, the dot kernels over i8 weights (digit products; i8
//   activations over byte pairs) and i4 × i8 (DotGemmEmitter.cpp prefetchSteps: i8
//   weights from two distances or not at all, i4 × i8 from two or one).
// Zen 4, 4096² i8 from DRAM, 1 thread, µs a call with / without: digit products 572-594
// / 480-511, i8 activations over vpdpbusd, now never prefetched, 235-246 / 202-217 from
// L3; the f32 kernel's widened i8, 640-673 / 671-719, and i4, one line a step, keep
// theirs. The classes lose by it on the same hosts (Zen 4) and gain on the same (Xeon
// guest with AMX), but by different amounts: on the Zen 4 guest the f16 calls alone,
// 5-10 % apart there, chose prefetch in 2 processes of 6, which cost the dot kernels
// 20-40 % (1 thread, one row from DRAM, best ms a call on / off: i4 × i8 16384×8192
// 2.96-3.01 / 2.33-2.39, i8 8192² 2.76-2.87 / 1.61-1.69); timed on their own, i4 × i8
// chose off in 16 of 19. Of the prompt-shaped GEMMs only
// f16/bf16's are concerned, and --generate compiles its prompt's program with the choice
// deferred (JitEngine::deferWeightPrefetchChoice), so the first token never waits for it.
inline StreamPrefetchClass streamPrefetchClass(const GemmSpec& spec, const MicroKernelShape& shape) {
  using C = StreamPrefetchClass;
  if (spec.weightType == nnc::DType::I8 && spec.M <= kDecodePrefetchRows)
    return usesDotKernel(spec, shape) && !dotWeightsUnprefetched(spec, shape) ? C::Dot : C::None;
  if (spec.weightType == nnc::DType::I4 && spec.M <= kDecodePrefetchRows)
    return spec.activationType == nnc::DType::I8 ? C::Dot : C::None;
  if (spec.activationType != nnc::DType::F32) return C::None;
  return spec.weightType == nnc::DType::F16 || spec.weightType == nnc::DType::BF16 ||
                 (spec.weightRows && spec.M <= kDecodePrefetchRows)
             ? C::Widened
             : C::None;
}
// Of those, the GEMMs whose prefetch distance is the choice's too
// (MicroKernelShape::halfWeightPrefetchBytes): f16/bf16 weights widened to f32. The
// others' distances are their own.
inline bool followsHalfWeightPrefetchDistance(const GemmSpec& spec) {
  return spec.weightType == nnc::DType::F16 || spec.weightType == nnc::DType::BF16;
}
MicroKernelShape kernelShapeFor(const GemmSpec& spec, const MicroKernelShape& row);

// How the emitted code cuts the problem; the runtime splits work along these units.
struct GemmPlan {
  int64_t rowBlockRows; // MR: rows per row block (the last block may be shorter)
  int64_t rowBlocks;    // ceil(M / MR)
  int64_t panels;       // ceil(N / NR)
  int64_t NR;
  int64_t kBlocks = 1;  // ceil(K / KC): K blocks of the loop nest (gemmBlocking)
  bool tiles = false;   // products on AMX tiles (DotGemmEmitter.h: usesTiles)
  int64_t packedAFloats = 0; // the packed A block's floats (ResolvedBlocking), in scratchBytes
  bool dot = false;     // DotGemmEmitter's kernel (usesDotKernel): each task converts its rows of A
  // The aPack buffer each call needs (GemmKernelFn), in bytes: the packed A block and a
  // panel's f32 copy (kernelScratch), or a dot kernel's converted rows (dotScratchBytes).
  // Kernels keep no large buffer on the stack, so their frames stay small whatever the
  // shape (runtime/KernelStack.h).
  int64_t scratchBytes = 0;
};
// features: the host's, for low-precision activations (their row blocks follow the
// instructions: kTileRows on AMX tiles, DotGemmEmitter.h).
GemmPlan planGemm(const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features = {});

// The cache blocking of a kernel, in the emitted loop nest (BLIS order):
//   for each NC chunk of the task's panels          (a KC×NC slice of packed B in L3)
//     for each K block of KC                         (partial sums accumulate in C)
//       for each MC chunk of the task's row blocks   (an MC×KC block of A in L2)
//         for each panel of the chunk                (a KC×NR slice of B in L1)
//           for each row block of the chunk: MR×NR register block over the K block
// The first K block stores its partial sums to C, later ones load C, add and store;
// only the last applies the epilogue (bias, activation, residual). With a residual
// and no activation the first K block starts from the residual instead (the sum is
// linear), so residual may alias C; with an activation the residual is read by the
// last K block only, so it must not alias C when kBlocks > 1 (runtime::Gemm then
// uses a one-K-block kernel). With K blocks, each MC×KC block of A is first copied into
// MR-row micro-panels (k-major) in the caller's aPack buffer; with whole K too when
// A's rows are a multiple of 4 KiB apart and the weights stream from beyond L2
// (packsWholeK). Sizes come from spec.kc/mc/nc when set, else from
// chooseBlocking(shape, hostCacheSizes()); without a forced KC, K stays whole while
// a K×NR panel of packed B fits in half of L2 (then each panel stays in L2 across the
// MC chunk's row blocks), and always when the rows fit one row block (M <= MR). With
// whole K and all of B small next to L3, MC shrinks so the chunk of A stays in L2
// (GemmPlan.cpp: wholeKRowChunk). A chunk loop that would run once is not emitted.
// With K blocks, each block's C tile is prefetched (write intent) before its K loop.
struct ResolvedBlocking {
  int64_t KC, kBlocks;  // K block and ceil(K / KC)
  int64_t rowBlocksPerChunk; // MC / MR (>= 1)
  int64_t panelsPerChunk;    // NC / NR (>= 1)
  bool packA;                // copy each MC×KC block of A into aPack (GemmKernelFn)
  int64_t packedAFloats = 0; // aPack's size when packA: an MC×KC block (+ one vector)
};
// With K blocks, the packed A block holds at most this many floats (256 KiB), which
// caps MC; a whole-K chunk at most kMaxWholeKPackedAFloats (4 MiB), else A is read
// where it lies.
inline constexpr int64_t kMaxPackedAFloats = 64 * 1024;
inline constexpr int64_t kMaxWholeKPackedAFloats = 1024 * 1024;
// The K block of a row that runs at half rate, when K is blocked (gemmBlocking).
inline constexpr int64_t kHalfRateKC = 768;
ResolvedBlocking gemmBlocking(const GemmSpec& spec, const MicroKernelShape& shape);

// Weights that do not stay in L2 between passes over them (more than half of it): they
// come from L3 or DRAM at every pass, which the blocking rules plan around. An unknown
// L2 counts as small.
bool weightsOutgrowL2(const GemmSpec& spec);
// C that does not stay in L2 (more than all of it): its tiles are written to lines in no
// cache. An unknown L2 counts as small.
bool outputOutgrowsL2(const GemmSpec& spec);

// Accumulator sets for a block of `rows` rows: enough independent chains
// (rows × NR/W × sets >= kMinFmaChains) within the register budget of the row
// (shape.registers - 4 accumulators, leaving room for the B vectors and the
// broadcasts: 12 of 16, 28 of 32; registers / 2 for one-vector blocks, whose
// broadcasts LLVM hoists). 1, 2 or 4.
// vectorsPerRow: vectors the block computes per row (NR/W when 0; a tail panel of
// N % NR <= W columns computes only ceil(columns / W)).
int accumulatorSets(int64_t rows, const MicroKernelShape& shape, int vectorsPerRow = 0);

// The narrow-tail path: the N % NR tail channels are computed as dot products along K
// when that needs fewer FMAs than the tail's vectors of a broadcast panel (the tail is
// not a whole number of vectors) and K is long enough to fill vectors (K >= 4 W).
bool useRowTail(const GemmSpec& spec, const MicroKernelShape& shape);
// The packed-weights layout of a kernel: NR panels, with rowTail per useRowTail.
PanelLayout gemmPanelLayout(const GemmSpec& spec, const MicroKernelShape& shape);
// Rows × channels of one dot-product block of the narrow tail (<= 12 accumulators).
int dotTailRows(const MicroKernelShape& shape); // a divisor of MR, <= 3
inline constexpr int kDotColumns = 4;

// Few rows (M <= 3): the full panels go several at a time through one register block
// (B·NR/W weight vectors per k step, independent streams): 4 for i4 at one row with 32
// registers, else 2; a full panel left alone uses the block's accumulator sets so that
// its sums, hence the bits, are the same. 1: one panel at a time.
int blockPanels(const GemmSpec& spec, const MicroKernelShape& shape);

// GemmEmitter's scratch in the aPack buffer: the packed A block (ResolvedBlocking::
// packA) at its start, then, 64-byte aligned, one panel's K block in f32 (its
// panelCopyFloats; 0: none) where the kernel widens low-precision weights once for all
// its row blocks, or transposes weights in place at many rows (GemmEmitter.cpp:
// widensPanels). `shape` is the kernel's (kernelShapeFor).
struct KernelScratch {
  int64_t panelCopyOffset = 0, panelCopyFloats = 0;
  int64_t bytes = 0;
};
KernelScratch kernelScratch(const GemmSpec& spec, const MicroKernelShape& shape, const ResolvedBlocking& blocking);
// Whether the kernel widens low-precision weights into that copy: a panel at a time, two
// row blocks or more, no row tail, the K block within kMaxPanelCopyFloats.
bool widensPanels(const GemmSpec& spec, const MicroKernelShape& shape, const ResolvedBlocking& blocking);

// "nnc_" + the spec's key, + "_noprefetch" where the row's weight-prefetch choice applies
// and is off, or for f16/bf16 weights "_prefetch1024" where it prefetches at another than
// the default distance: one engine can hold both (JitEngine::deferWeightPrefetchChoice).
std::string gemmFunctionName(const GemmSpec& spec, const MicroKernelShape& shape);

// Throws std::invalid_argument for a spec the emitter cannot build (non-positive
// sizes, i32 weights, i4 without a scale group).
void validateGemmSpec(const GemmSpec& spec);

} // namespace nnc::codegen
