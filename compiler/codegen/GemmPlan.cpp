// The plan of a GEMM kernel (GemmPlan.h): which specs the emitter builds, the register
// block, the cache blocks of the loop nest, the packed-weights layout, and the units
// the runtime splits work along. GemmEmitter.cpp emits the code these choose.
#include "compiler/codegen/GemmPlan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "compiler/codegen/DotGemmEmitter.h"

namespace nnc::codegen {

std::string gemmFunctionName(const GemmSpec& spec, const MicroKernelShape& shape) {
  const std::string name =
      "nnc_" + spec.key() + (!shape.pairsOneRowPanels && followsPanelPairingChoice(spec, shape) ? "_single" : "");
  if (!prefetchChoiceApplies(spec, shape)) return name;
  if (!shape.prefetchesStreamedWeights) return name + "_noprefetch";
  const bool otherDistance =
      followsHalfWeightPrefetchDistance(spec) && shape.halfWeightPrefetchBytes != kHalfWeightPrefetchBytes;
  return otherDistance ? name + "_prefetch" + std::to_string(shape.halfWeightPrefetchBytes) : name;
}

void validateGemmSpec(const GemmSpec& s) {
  if (s.M < 1 || s.N < 1 || s.K < 1)
    throw std::invalid_argument("gemm: M, N, K must be >= 1 (got " + s.key() + ")");
  if (s.weightType == DType::I32)
    throw std::invalid_argument("gemm: weights cannot be stored as i32 (f32, f16, bf16, i8, i4)");
  if (s.weightType == DType::I4 && s.quantGroup < 1)
    throw std::invalid_argument("gemm: i4 weights need a scale group of >= 1 K steps (got " + s.key() + ")");
  // Low-precision activations multiply weights of the same type, or i4 under i8
  // (DotGemmEmitter.h), whose scale groups hold whole unrolled dot steps.
  if (s.activationType != DType::F32 && !activationsMultiply(s.activationType, s.weightType))
    throw std::invalid_argument("gemm: " + std::string(dtypeName(s.activationType)) +
                                " activations need " + std::string(dtypeName(s.activationType)) +
                                (s.activationType == DType::I8 ? " or i4" : "") + " weights (got " + s.key() + ")");
  if (s.activationType == DType::I8 && s.weightType == DType::I4 && s.quantGroup % kDotI4GroupMultiple != 0)
    throw std::invalid_argument("gemm: i4 weights under i8 activations need a scale group that is a multiple of " +
                                std::to_string(kDotI4GroupMultiple) + " k steps (got " + s.key() + ")");
  if (s.activationType != DType::F32 && s.activationType != DType::BF16 && s.activationType != DType::I8)
    throw std::invalid_argument("gemm: activations are f32, bf16 or i8 (got " + s.key() + ")");
  if (s.gated && (s.N % kGatedColumnMultiple != 0 || s.residual || s.actAfterResidual != Activation::None ||
                  s.windows.c > 0 || (s.kc != 0 && s.kc != s.K)))
    throw std::invalid_argument("gemm: a gated GEMM needs N a multiple of " + std::to_string(kGatedColumnMultiple) +
                                ", no residual or conv windows, and whole K (got " + s.key() + ")");
  if (s.weightRows && !weightRowsSupported(s))
    throw std::invalid_argument("gemm: weights in place need f32 weights and activations, no conv windows, and "
                                "K <= " + std::to_string(kMaxPanelCopyFloats / kMaxNR) +
                                " when gated or with a residual after an activation (got " + s.key() + ")");
  const GemmSpec::Windows& w = s.windows;
  if (w.c > 0) {
    const int64_t pixels = w.outH() * w.outW();
    if ((w.rows ? w.ph != 0 || w.pw != 0 : w.c % kWindowChannelMultiple != 0) || s.K != w.kh * w.kw * w.c ||
        pixels < 1 || s.M % pixels != 0 || s.activationType != DType::F32 || (s.kc != 0 && s.kc != s.K))
      throw std::invalid_argument("gemm: conv windows need channels a multiple of " +
                                  std::to_string(kWindowChannelMultiple) +
                                  " (whole window rows: no padding), K = kh·kw·c, M whole images, f32 activations "
                                  "and whole K (got " + s.key() + ")");
  }
}

bool weightsOutgrowL2(const GemmSpec& spec) {
  const int64_t l2 = hostCacheSizes().l2;
  return l2 <= 0 || bytesFor(spec.N * spec.K, spec.weightType) > l2 / 2;
}

bool outputOutgrowsL2(const GemmSpec& spec) {
  const int64_t l2 = hostCacheSizes().l2;
  return l2 <= 0 || spec.M * spec.N * int64_t(sizeof(float)) > l2;
}

namespace {

// Whole K: an MC chunk of A (MC×K floats, unpacked) is reused by every panel, each
// K×NR panel of B by the chunk's row blocks, and all of B is read once per chunk.
// - B that stays in L2 (<= L2/2): re-reading it per chunk is cheap, and a chunk that
//   stays in L2 too (<= L2/4, at most 8 row blocks) wins: 512³ 2-3.5 % faster than
//   MC = 504 (same-process A/B, 1 thread).
// - Larger B comes from L3 or DRAM on every pass, and in a model it always does: each
//   call streams every layer's weights once, which evicts the layer before. A second
//   pass over B costs far more than reading A from L3, so a chunk takes every row up
//   to max(L2 / (K floats), 256) rows (then near-equal chunks). Measured on a Sapphire
//   Rapids guest, 1 thread, weights in 4-8 distinct copies so that each call reads them
//   from DRAM: 128×5632×2048 105 → 143 GFLOP/s, 128×2048×5632 (2 passes at 72 rows
//   111, 1 pass 141), 256×3072×768 147 → 167, 512×5632×2048 117 → 158; with warm B,
//   1024³ 177 → 181. The 256-row floor keeps prefill chunks (M ≈ 128) whole at any K.
//   Guests report the host's whole L3 (480 MiB here), so L3 does not enter the rule.
int64_t wholeKRowChunk(const GemmSpec& spec, const MicroKernelShape& shape, int64_t fallback) {
  const CacheSizes& c = hostCacheSizes();
  if (c.l2 <= 0) return fallback;
  const int64_t MR = shape.MR;
  if (!weightsOutgrowL2(spec)) {
    const int64_t rows = c.l2 / 4 / (spec.K * 4) / MR * MR;
    return std::clamp<int64_t>(rows, MR, 8 * MR);
  }
  const int64_t cap = std::clamp<int64_t>(std::max<int64_t>(c.l2 / (spec.K * 4), 256) / MR * MR,
                                          MR, 1020 / MR * MR);
  const int64_t chunks = (spec.M + cap - 1) / cap;
  const int64_t rows = (spec.M + chunks - 1) / chunks;
  return (rows + MR - 1) / MR * MR;
}

// Whole K, A's rows a multiple of 4 KiB apart (K = 1024, 2048, 3072, ...): the MR rows a
// block reads side by side sit on one L1 set, which the stream of B keeps evicting them
// from. With weights from beyond L2 (a transformer's prefill), the chunk's rows packed
// into micro-panels once per call measured faster (1 thread, Sapphire Rapids guest,
// avx512 row, same-binary A/B, ranges over alternating runs on a noisy guest): 8
// layers of 128×2048×2048 (weights from DRAM) 177-179 -> 181-189 GFLOP/s, as fast as
// rows 2064 floats apart (181-188) unpacked; 4 layers of 128×11264×2048 126-136 ->
// 122-132 ms; TinyLlama's prefill: q/k/v/o 312-334 -> 302-310 ms, head 96-101 -> 90-92,
// its gate/up/down GEMMs no better (1029-1085 -> 1073-1103 ms in that run). Square
// GEMMs with warm weights (1024³, 2048³) measured the same either way.
bool packsWholeK(const GemmSpec& spec, const MicroKernelShape& shape, const ResolvedBlocking& r) {
  const int64_t rowBlocks = (spec.M + shape.MR - 1) / shape.MR;
  return r.kBlocks == 1 && spec.windows.c == 0 && spec.K * 4 % 4096 == 0 && rowBlocks >= 2 &&
         weightsOutgrowL2(spec) &&
         std::min(r.rowBlocksPerChunk, rowBlocks) * shape.MR * spec.K <= kMaxWholeKPackedAFloats;
}
} // namespace

constexpr int64_t kTallBlockRows = 16;
constexpr int kPairBlockRows = 4;

MicroKernelShape kernelShapeFor(const GemmSpec& spec, const MicroKernelShape& row) {
  if (spec.activationType == DType::I8 && spec.weightType == DType::I4) { // DotGemmEmitter.h: i8 × i4
    MicroKernelShape s = row;
    // Byte pairs over more rows than one block: blocks of kPairBlockRows, which load the
    // panel's nibbles split once (DotGemmEmitter.cpp: unpacksPanels) and have the
    // registers the split took (Zen 3, 1 thread, 128 × 5632 × 2048, interleaved: 16.4-17.4
    // ms in blocks of 3 splitting, 15.8-16.8 unpacked, 15.1-15.3 unpacked in blocks of 4,
    // 15.7-16.5 of 5; blocks of 4 splitting 16.5-17.1).
    s.MR = row.bytePairs && spec.M > kPairBlockRows ? kPairBlockRows : std::max(1, row.MR / 2);
    return s;
  }
  if (spec.activationType == DType::I8 && spec.weightType == DType::I8 && row.bytePairs) { // DotGemmEmitter.cpp: dot
    // i8 × i8 byte pairs: blocks of kPairBlockRows, whose 8 accumulators, 2 weight
    // vectors, the ones and a row's broadcasts fit 16 registers (Zen 3, 1 thread,
    // 128 × 5632 × 2048, |q_a| stored: 130-133 GFLOP/s in blocks of 6, 132 of 5, 133 of
    // 3, 139-141 of 4).
    MicroKernelShape s = row;
    s.MR = kPairBlockRows;
    return s;
  }
  if (usesDigitProducts(spec, row) && !widensDigitLayout(spec, row)) { // DotGemmEmitter.h: three digits' sums a row and vector
    MicroKernelShape s = row;
    s.MR = std::max(1, row.MR / 4);
    return s;
  }
  // One vector of columns and a few rows more than MR (16³ on the avx512 row): one block
  // of all M rows (<= kTallBlockRows accumulators) instead of MR rows and a short tail
  // block. Sapphire Rapids guest, 1 thread, same binary, six alternating runs of
  // peer_bench --only square: 16³ median against LIBXSMM's 0.69-0.75 -> 0.80-1.00. (With
  // FMAs that still addressed A with an index register, and up to 24 rows for N <= 16,
  // it was not kept: 64×10×128 lost at 22-row blocks.)
  if (spec.activationType == DType::F32 && row.registers >= 32 && spec.N == row.vectorFloats &&
      spec.M > row.MR && spec.M <= kTallBlockRows && spec.windows.c == 0) {
    MicroKernelShape s = row;
    s.MR = int(spec.M);
    return s;
  }
  if (spec.activationType == DType::F32 && row.registers >= 32 && row.NR == 2 * row.vectorFloats &&
      spec.N == 2 * row.NR && spec.M >= kWideBlockMinRows) {
    MicroKernelShape s = row;
    s.MR = row.MR / 2;
    s.NR = 2 * row.NR;
    return s;
  }
  return row;
}

ResolvedBlocking gemmBlocking(const GemmSpec& spec, const MicroKernelShape& rowShape) {
  const MicroKernelShape shape = kernelShapeFor(spec, rowShape);
  if (usesDotKernel(spec, shape)) // DotGemmEmitter.h: whole K, its own row chunks
    return {spec.K, 1, (spec.M + shape.MR - 1) / shape.MR, (spec.N + shape.NR - 1) / shape.NR, false};
  GemmBlocking chosen = chooseBlocking(shape, hostCacheSizes());
  // K blocks by default only when a whole-K panel of packed B (K×NR floats) no longer
  // fits in half of L2: up to there the MC chunks below keep each panel in L2 across a
  // chunk's row blocks, which measured faster than K blocks of KC (1024³, 2048³ at 1
  // thread: 107 vs 99, 106 vs 87-101 GFLOP/s) with this emitter's A packing.
  const int64_t l2 = hostCacheSizes().l2;
  const bool panelFitsL2 =
      l2 > 0 ? bytesFor(spec.K * shape.NR, spec.weightType) <= l2 / 2 : spec.K <= 4 * chosen.KC;
  // Conv windows keep K whole: their A rows are read where they lie (emitBlock); gated
  // GEMMs too: their C holds products, not partial sums.
  // Weights in place at few rows: dot products along whole rows (GemmEmitter.h).
  const bool rowsDot = spec.weightRows && spec.M <= shape.MR;
  // K blocks at half rate (MicroKernelShape::halfRate) are kHalfRateKC deep instead of
  // the L1-sized KC: a k step there takes twice the cycles, so B's slice of a block
  // streams from L2 in time, and deeper blocks make fewer passes over C and fewer
  // packings of A. Zen 4 guest (32 KiB L1: KC 128), avx512 row, 1 thread, peer_bench
  // --gemm --shape, best GFLOP/s, KC 128 -> 768: 128×2048×5632 101-103 -> 110-111,
  // 392×512×4608 (ResNet-18's last 3×3 convs as one GEMM at batch 8) 106-107 -> 111
  // (oneDNN 110-115); KC 256-512 in between.
  const int64_t blockKC = shape.halfRate ? std::max(chosen.KC, kHalfRateKC) : chosen.KC;
  int64_t KC = rowsDot                                                                 ? spec.K
               : spec.kc > 0                                                           ? spec.kc
               : spec.M <= shape.MR || panelFitsL2 || spec.windows.c > 0 || spec.gated ? spec.K
                                                                                       : blockKC;
  KC = std::min(KC, spec.K);
  int64_t MC = spec.mc > 0 ? spec.mc : chosen.MC;
  int64_t NC = spec.nc > 0 ? spec.nc : chosen.NC;
  if (spec.mc == 0 && KC == spec.K) MC = wholeKRowChunk(spec, shape, MC);
  // Weights from L3/DRAM whose whole-K chunk of A outgrows half of L2 (128 rows of
  // K = 5632, 2.9 MiB): each row block then reads its A rows from L3 at 12 strided
  // streams. K blocks with packed A keep the block's A in L1 instead: 128×2048×5632
  // with weights from DRAM, 1 thread, 137-143 -> 178-189 GFLOP/s at KC 384 (KC 192:
  // 156-169; the B slice of 384 k steps fills L1 on the avx512 row).
  // Also with few row blocks (<= 8) and a long K: each panel then serves few blocks, and
  // the first one, which streams it from DRAM at whole K, is bound by the stream:
  // weights from DRAM, 1 thread, avx512 row, KC 384: 49×512×4608 (ResNet-18's last 3×3
  // convs at batch 1) 124-130 -> 153-160, 64×4096×4096 133-136 -> 166-170, 96×2048×2048
  // 177-181 -> 187-193 GFLOP/s; 128×2048×2048 (11 blocks) 180 -> 171, so not there.
  // Not when the whole-K chunk of A is packed (packsWholeK: K a multiple of 1024): its
  // rows are then contiguous micro-panels, and K blocks only add passes over C. Zen 5
  // guest, avx512 row, 1 thread, same-process A/B of whole K against KC 384: 1024³
  // 177 -> 194-197, 2048³ 176-188 -> 201-205 GFLOP/s (warm weights); weights from DRAM:
  // 128×5632×2048 189 -> 204, 512×5632×2048 179 -> 200, 128×2048×2048 and
  // 128×256×2048 within the noise.
  // Not when a row block's whole-K rows of A fit in L1 (K <= 1024 on the avx512 row's 12
  // rows of a 48 KiB L1): the block then reads them from L1 at whole K anyway, and K
  // blocks only add A packing and passes over C. Zen 5 guest, 1 thread, avx512 row,
  // warm weights, same-process A/B of whole K against KC 384: 512³ 212-213 -> 220-223,
  // 256×3072×768 199 -> 207-209 GFLOP/s.
  // Not on a host that runs the row at half rate (MicroKernelShape::halfRate): there a
  // k step takes twice the cycles, the streams keep up, and K blocks only add A packing
  // and passes over C. Zen 4 guest (32 KiB L1, 1 MiB L2), avx512 row, same-process A/B
  // of the blocks these rules chose against whole K, best / median GFLOP/s: 1 thread
  // 256×3072×768 105 / 102 -> 112 / 111, 256×3072×1536 104 / 101 -> 112 / 111,
  // 256×8192×1536 97 / 93 -> 109 / 109, 128×2048×5632 99 / 95 -> 111 / 100,
  // 64×4096×4096 104 / 104 -> 108 / 106, 49×512×4608 107 / 107 -> 111 / 111,
  // 96×2048×2048 108 / 107 -> 113 / 113; 2 threads 256×3072×1536 200 / 189 -> 214 / 210,
  // 128×2048×5632 193 / 186 -> 203 / 196.
  const int64_t l1 = hostCacheSizes().l1d;
  const bool blockRowsFitL1 = l1 > 0 && shape.MR * spec.K * 4 <= l1;
  const bool fewRowBlocks = (spec.M + shape.MR - 1) / shape.MR <= 8 && spec.K >= 8 * chosen.KC;
  const bool chunkOutgrowsL2 = std::min(MC, spec.M) * spec.K * 4 > l2 / 2 && !blockRowsFitL1;
  const ResolvedBlocking wholeK{KC, 1, std::max<int64_t>(1, MC / shape.MR), std::max<int64_t>(1, NC / shape.NR), false};
  if (spec.kc == 0 && KC == spec.K && spec.M > shape.MR && l2 > 0 && weightsOutgrowL2(spec) && spec.windows.c == 0 &&
      !spec.gated && !shape.halfRate && ((chunkOutgrowsL2 && !packsWholeK(spec, shape, wholeK)) || fewRowBlocks)) {
    KC = std::min(spec.K, 2 * chosen.KC);
    MC = spec.mc > 0 ? spec.mc : chosen.MC;
  }
  // Weights in place at many rows: each K block of a panel is transposed into a
  // copy of at most kMaxPanelCopyFloats (never below a K that must stay whole:
  // weightRowsSupported).
  if (spec.weightRows && spec.M > shape.MR && KC * shape.NR > kMaxPanelCopyFloats) {
    KC = kMaxPanelCopyFloats / shape.NR;
    MC = spec.mc > 0 ? spec.mc : chosen.MC;
  }
  ResolvedBlocking r{KC, (spec.K + KC - 1) / KC, std::max<int64_t>(1, MC / shape.MR),
                     std::max<int64_t>(1, NC / shape.NR), false};
  // Rows of A are K floats apart: with K blocks, an MC block of them maps onto few
  // cache sets (K = 1024, 2048: 4-8 KiB strides), so copy it into a contiguous buffer.
  r.packA = r.kBlocks > 1;
  if (r.packA)
    r.rowBlocksPerChunk = std::clamp<int64_t>(kMaxPackedAFloats / (KC * shape.MR), 1,
                                              r.rowBlocksPerChunk);
  else
    r.packA = packsWholeK(spec, shape, r);
  if (r.packA)
    r.packedAFloats = std::min(r.rowBlocksPerChunk, (spec.M + shape.MR - 1) / shape.MR) * shape.MR * KC +
                      shape.vectorFloats; // + W: the spill of emitPackTile's last store
  return r;
}

GemmPlan planGemm(const GemmSpec& spec, const MicroKernelShape& rowShape, const CpuFeatures& features) {
  const MicroKernelShape shape = kernelShapeFor(spec, rowShape);
  const bool tiles = usesTiles(spec, features, shape);
  const int64_t MR = tiles ? kTileRows : shape.MR;
  const ResolvedBlocking blocking = gemmBlocking(spec, shape);
  const bool dot = usesDotKernel(spec, shape);
  return {MR,    (spec.M + MR - 1) / MR, (spec.N + shape.NR - 1) / shape.NR, shape.NR, blocking.kBlocks,
          tiles, blocking.packA ? blocking.packedAFloats : 0, dot,
          dot ? dotScratchBytes(spec, shape, features) : kernelScratch(spec, shape, blocking).bytes};
}

// Low-precision weights at several row blocks (M >= 2·MR): each row block would widen
// the panel's weights to f32 again (i4: nibble lookup, shift, scale: 3-4 vector
// operations per W weights; f16, bf16, i8: one or two) next to the MR FMAs that use
// them. So the panel's K block is widened once into an L2-resident f32 copy (KC×NR or
// K×NR floats <= kMaxPanelCopyFloats; GemmEmitter.cpp: wide_) that every row block then
// reads like f32 weights; the values are the direct path's (f32(q)·scale for i4, f32(q)
// for i8, whose scale stays in the epilogue), so results do not depend on the path. The
// task's first row block writes the copy as it widens for its own products (a separate
// widening pass before it was bound by writing the copy: 64×784×256 f16 122 µs, now
// 113; f32 108).
// Measured (1 thread, 64×4096×4096, weights from DRAM): i4 on the avx512 row 68-90 ->
// 162-174 GFLOP/s (f32: 145), avx2 row 74 -> 108 (f32: 111). With the weights in cache
// (MLP 784→256→128→10 at batch 64, peer_bench --mlp): f16 153.7 µs without the copy,
// 141.4 with a widening pass, 132.2 widened by the first block; bf16 151.3 / 142.4 /
// 131.4; i8 156 / 140 / 132.2 (f32 127.1).
bool widensPanels(const GemmSpec& spec, const MicroKernelShape& shape, const ResolvedBlocking& blocking) {
  return spec.weightType != DType::F32 && blockPanels(spec, shape) == 1 && spec.M / shape.MR >= 2 &&
         !gemmPanelLayout(spec, shape).hasRowTail() && std::min(blocking.KC, spec.K) * shape.NR <= kMaxPanelCopyFloats;
}

KernelScratch kernelScratch(const GemmSpec& spec, const MicroKernelShape& shape, const ResolvedBlocking& blocking) {
  constexpr int64_t kAlign = 64;
  KernelScratch s;
  const int64_t packedA = blocking.packA ? blocking.packedAFloats * int64_t(sizeof(float)) : 0;
  s.panelCopyOffset = (packedA + kAlign - 1) / kAlign * kAlign;
  const bool transposesRows = spec.weightRows && spec.M > shape.MR; // at fewer rows: dots along the rows
  if (widensPanels(spec, shape, blocking) || transposesRows)
    s.panelCopyFloats = std::min(blocking.KC, spec.K) * shape.NR;
  s.bytes = s.panelCopyFloats > 0 ? s.panelCopyOffset + s.panelCopyFloats * int64_t(sizeof(float)) : packedA;
  return s;
}

int accumulatorSets(int64_t rows, const MicroKernelShape& shape, int vectorsPerRow) {
  if (vectorsPerRow <= 0) vectorsPerRow = shape.NR / shape.vectorFloats;
  const int64_t chainsPerSet = rows * vectorsPerRow;
  // A one-vector block (a narrow tail panel) feeds each broadcast to a single FMA, and
  // LLVM's scheduler hoists an unrolled step's broadcasts ahead of their FMAs: 12
  // accumulators + 6 broadcasts + B outgrow 16 registers (23³: 64 spill instructions,
  // 85 vs 96 GFLOP/s; 100×24×100: 81 vs 102), so such blocks keep at most 8.
  // Scaled to the row's registers: 8 / 12 of 16, 16 / 28 of 32.
  const int64_t kMaxAccumulators =
      vectorsPerRow == 1 ? shape.registers / 2 : shape.registers - 4;
  int sets = 1;
  while (sets < 4 && chainsPerSet * sets < kMinFmaChains &&
         chainsPerSet * sets * 2 <= kMaxAccumulators)
    sets *= 2;
  return sets;
}

bool useRowTail(const GemmSpec& spec, const MicroKernelShape& shape) {
  const int64_t W = shape.vectorFloats, tail = spec.N % shape.NR;
  return spec.weightType == DType::F32 && !spec.weightRows && spec.windows.c == 0 && tail != 0 && tail % W != 0 && spec.K >= 4 * W;
}

PanelLayout gemmPanelLayout(const GemmSpec& spec, const MicroKernelShape& rowShape) {
  const MicroKernelShape shape = kernelShapeFor(spec, rowShape);
  return {spec.N,          spec.K, shape.NR, useRowTail(spec, shape), spec.weightType,
          spec.weightType == DType::I4 ? spec.quantGroup : 0,
          usesDigitProducts(spec, shape) ? dotKPack(DType::I8) : dotKPack(spec.activationType), spec.gated,
          spec.weightRows};
}

bool weightRowsSupported(const GemmSpec& spec) {
  // Gated GEMMs, and a residual after an activation (runtime::Gemm's alias-safe variant),
  // need K whole: its panel copy must fit kMaxPanelCopyFloats at any row's NR.
  const bool wholeK = spec.gated || (spec.residual && spec.act != Activation::None);
  return spec.weightType == DType::F32 && spec.activationType == DType::F32 && spec.windows.c == 0 &&
         (!wholeK || spec.K * kMaxNR <= kMaxPanelCopyFloats);
}

int blockPanels(const GemmSpec& spec, const MicroKernelShape& shape) {
  if (spec.weightRows) return 1;
  if (spec.M > 3 || spec.M >= shape.MR || spec.N / shape.NR < 2) return 1;
  // i4 at one row with 32 registers: the group sums of 4 panels (8 chains, one set)
  // and their running totals fit.
  const bool quads = spec.weightType == DType::I4 && spec.M == 1 && shape.registers >= 32 && spec.N / shape.NR >= 4;
  return quads ? 4 : 2;
}

int dotTailRows(const MicroKernelShape& shape) {
  for (int r = 3; r > 1; --r)
    if (shape.MR % r == 0) return r;
  return 1;
}

} // namespace nnc::codegen
