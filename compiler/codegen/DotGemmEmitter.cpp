// The dot-product GEMM (DotGemmEmitter.h). Reading order: DotGemmBuilder::emit →
// convertRows → emitPanel → emitBlock → dotStep / emitEpilogue.
#include "compiler/codegen/DotGemmEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/GemmEmitter.h"
#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PackLayout.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/StoredTable.h"
#include "compiler/codegen/VectorMath.h"
#include "runtime/io/HalfFloat.h"

namespace nnc::codegen {

// Digit products cut each f32 activation into this many 8-bit digits (below).
constexpr int kDigits = 3;

using llvm::Value;

int64_t dotKPack(DType activations) {
  return activations == DType::BF16 ? 2 : activations == DType::I8 ? 4 : 1;
}

bool bytePairProducts(const CpuFeatures& f, const MicroKernelShape& shape) {
  return shape.vectorFloats == 8 && shape.fma && f.avx2 && !f.avxvnni;
}

std::string missingDotInstructions(DType activations, const CpuFeatures& f, const MicroKernelShape& shape) {
  const bool wide = shape.vectorFloats == 16;
  if (activations == DType::BF16)
    return f.avx512bf16 && wide ? "" : "AVX512_BF16 (vdpbf16ps) on the AVX-512 kernel row";
  if (activations == DType::I8)
    return (wide && f.avx512vnni) || (shape.vectorFloats == 8 && f.avxvnni) || bytePairProducts(f, shape)
               ? ""
               : "AVX512_VNNI (vpdpbusd) on the AVX-512 kernel row, or AVX2 on the AVX2 row";
  return "";
}

bool usesTiles(DType activations, DType weights, const CpuFeatures& f, const MicroKernelShape& shape) {
  if (shape.vectorFloats != 16 || shape.NR % 16 != 0 || shape.NR > 32) return false;
  if (activations == DType::I8 && weights == DType::I4) return shape.NR == 32 && f.amxInt8 && f.avx512vnni;
  if (weights != activations) return false;
  return activations == DType::BF16 ? f.amxBf16 && f.avx512bf16 : activations == DType::I8 && f.amxInt8 && f.avx512vnni;
}

bool usesTiles(const GemmSpec& spec, const CpuFeatures& f, const MicroKernelShape& shape) {
  // Digit products multiply their digit rows as i8 rows.
  const bool digits = spec.activationType == DType::F32 && usesDigitProducts(spec, shape);
  if ((spec.activationType == DType::F32 && !digits) ||
      !usesTiles(digits ? DType::I8 : spec.activationType, spec.weightType, f, shape))
    return false;
  // i4 decode rows keep the vector kernels: 1 × 5632 × 2048 from L3 took 314 µs on tiles
  // (a group's split and conversion for one row) against 217. So do i8 × i8 decode rows
  // whose weights outgrow L2, which each call streams from L3 or DRAM: the vector kernel
  // prefetches that stream (from two distances where the host's measured choice keeps
  // prefetch, as on every AMX host measured), the tiles do not (Xeon guest with AMX,
  // TinyLlama i8 × i8 decode, tokens/s, five rounds interleaved: 1 thread 10.07-11.91 →
  // 11.46-12.03, 2 threads 18.94-20.44 → 20.59-22.12). Weights in L2 are read faster by
  // the tiles (1 × 256 × 2048: 4.5-4.8 against 6.5-6.7 µs; the MLP 784→256→128→10 at
  // batch 1, i8 × i8: 2.1-2.2 against 2.9 µs). By size, not by the host's choice: the
  // plan (runtime::Gemm) and the kernel must agree before it is measured. bf16 × bf16
  // alike, its vector kernel without software prefetch (prefetchSteps; same host,
  // TinyLlama bf16 × bf16 decode, tok/s: 1 thread 6.52-6.82 → 7.32-7.70, 2 threads
  // 12.12-12.53 → 14.11-14.57). Digit products, whose tiles multiply 16 rows' digits in
  // any block, from kDigitTileMinRows rows.
  const int64_t l2 = hostL2BytesOr(1024 * 1024);
  const bool streamed = spec.weightType != DType::I4 && bytesFor(spec.N * spec.K, spec.weightType) > l2;
  const int64_t minRows = digits ? kDigitTileMinRows : spec.weightType == DType::I4 || streamed ? kDecodePrefetchRows + 1 : 1;
  if (spec.M < minRows) return false;
  if (spec.weightType != DType::I4) return true;
  const int64_t group = spec.quantGroup;
  return group > 0 && group % 16 == 0 && (group <= kTileBytes || group % kTileBytes == 0) && spec.K % group == 0;
}

std::string productInstruction(DType activations, DType weights, const CpuFeatures& f, const MicroKernelShape& shape) {
  const std::string bytes = bytePairProducts(f, shape) ? "vpmaddubsw pairs" : "vpdpbusd";
  if (activations == DType::F32 && weights == DType::I8 && shape.digitProducts && !shape.bytePairs) {
    const std::string fma = "f32 FMA where N < " + std::to_string(kMinDigitI8N); // usesDigitProducts
    return usesTiles(DType::I8, weights, f, shape) ? "AMX tdpbusd (f32 activations as three 8-bit digits; " + bytes +
                                                         " below " + std::to_string(kDigitTileMinRows) + " rows, " +
                                                         fma + ")"
                                                   : bytes + " (f32 activations as three 8-bit digits; " + fma + ")";
  }
  if (activations == DType::F32 && weights == DType::I4 && shape.digitProducts) { // usesDigitProducts
    const std::string fma =
        "f32 FMA where K < " + std::to_string(kMinDigitI4K) + " or N < " + std::to_string(kMinDigitI4N);
    return usesTiles(DType::I8, weights, f, shape)
               ? "AMX tdpbssd (f32 activations as three 8-bit digits; " + bytes + " below " +
                     std::to_string(kDigitTileMinRows) + " rows, " + fma + ")"
               : bytes + " (f32 activations as three 8-bit digits; " + fma + ")";
  }
  if (activations == DType::F32) return shape.fma ? "f32 FMA" : "f32 multiply-add";
  const bool tiles = usesTiles(activations, weights, f, shape);
  const std::string name = activations == DType::BF16 ? (tiles ? "tdpbf16ps" : "vdpbf16ps")
                           : tiles                    ? (weights == DType::I4 ? "tdpbssd" : "tdpbusd")
                                                      : bytes;
  return tiles ? "AMX " + name : name;
}

bool followsPanelPairingChoice(const GemmSpec& spec, const MicroKernelShape& shape) {
  if (spec.M != 1 || shape.registers < 32 || gemmPanelLayout(spec, shape).fullPanels() < 2) return false;
  return spec.activationType == DType::I8 || usesDigitProducts(spec, shape);
}

bool pairsFullPanels(const GemmSpec& spec, const CpuFeatures& features, const MicroKernelShape& shape) {
  if (spec.M > kDecodePrefetchRows || gemmPanelLayout(spec, shape).fullPanels() < 2) return false;
  if (spec.activationType == DType::I8 && bytePairProducts(features, shape)) return true;
  return shape.pairsOneRowPanels && followsPanelPairingChoice(spec, shape);
}

std::vector<float> storedActivationValues(DType activations, const float* A, int64_t M, int64_t K) {
  std::vector<float> out(A, A + M * K);
  if (activations == DType::BF16)
    for (float& a : out) a = bf16ToFloat(floatToBf16(a));
  if (activations != DType::I8) return out;
  for (int64_t m = 0; m < M; ++m) {
    float* row = out.data() + m * K;
    float max = 0;
    for (int64_t k = 0; k < K; ++k) max = std::max(max, std::fabs(row[k]));
    const bool nan = std::any_of(row, row + K, [](float a) { return std::isnan(a); });
    const float inverse = max > 0 ? 127.0f / max : 0.0f, scale = nan ? NAN : max / 127.0f; // a NaN: the row's scale
    for (int64_t k = 0; k < K; ++k) {
      const float q = std::nearbyint(row[k] * inverse);
      row[k] = (std::isnan(q) ? 0.0f : std::clamp(q, -127.0f, 127.0f)) * scale;
    }
  }
  return out;
}

namespace {

constexpr int kUnrollSteps = 4; // dot steps per k-loop iteration; a multiple of every set count
// Byte pairs (bytePairProducts) sum up to kPairSpanSteps steps' vpmaddubsw pairs in i16
// before widening them: a pair of i4 weights is at most 2 · 15 · 128 in magnitude (a
// nibble q + 8 ≤ 15 against a digit in [−128, 127] or q_a in [−127, 127]), so eight steps
// (a g32 group) cannot saturate. The span is two k-loop iterations carrying the i16 sums,
// not one iteration of eight steps: that one measured slower on Zen 3 (1 thread, M = 1,
// 5632 × 2048 from L3: 455 against 430 µs), all eight steps' loads hoisted and spilled.
constexpr int kPairSpanSteps = 2 * kUnrollSteps;
static_assert(kPairSpanSteps * 2 * 15 * 128 <= 32767, "i16 pair sums must not saturate");
// Digit products: an activation is X · s with X an integer of at most kDigitRange in
// magnitude (24 bits: f32's significand), written as kDigits 8-bit digits.
constexpr int32_t kDigitRange = 127 * 65536;

// What a dot kernel is cut by, apart from the IR that builds it: rows per block and per
// chunk, converted rows' bytes, scale groups, and where its scratch lies in the caller's
// aPack buffer (GemmPlan::scratchBytes): the chunk's converted rows of A and what goes
// with them. dotScratchBytes reads it without building a kernel.
class DotKernelGeometry {
public:
  DotKernelGeometry(const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features, bool tiles,
                    bool pairs)
      : spec_(spec), shape_(shape), layout_(gemmPanelLayout(spec, shape)), tiles_(tiles), pairs_(pairs),
        MR_(tiles ? kTileRows : shape.MR), digits_(spec.activationType == DType::F32),
        i8_(spec.activationType == DType::I8 || digits_), i4_(i8_ && spec.weightType == DType::I4),
        W_(shape.vectorFloats) {
    const int64_t unitBytes = i8_ ? 1 : 2;
    rowBytes_ = (layout_.paddedK() * unitBytes + 63) / 64 * 64;
    // A tile load reads 16 rows at this stride: a multiple of 4 KiB would put them all
    // in one L1 set (12 ways).
    if (tiles_ && rowBytes_ % 4096 == 0) rowBytes_ += 64;
    rowStride_ = digits_ ? kDigits * rowBytes_ : signedPairs() ? 2 * rowBytes_ : rowBytes_;
    if (digits_ && spec.weightType != DType::I4 && spec.weightType != DType::I8)
      throw std::invalid_argument("gemm: digit products take i8 or i4 weights (got " + spec.key() + ")");
    if (i4_) { // validateGemmSpec checked the groups; a k step's nibbles are one vector
      if (shape.NR != 2 * W_) throw std::invalid_argument("gemm: i8 × i4 needs NR = 2 vectors (got " + spec.key() + ")");
      groups_ = (spec.K + spec.quantGroup - 1) / spec.quantGroup;
    }
    const int64_t rowBlocks = (spec.M + MR_ - 1) / MR_;
    rowBlocksPerChunk_ = std::clamp<int64_t>((tiles_ ? 2 : 1) * kMaxConvertedBytes / (MR_ * rowStride_), 1, rowBlocks);
    pairedPanels_ = !tiles_ && pairsFullPanels(spec, features, shape);
  }

  // Byte offsets of the scratch's parts in aPack (-1: not used), each 64-byte aligned.
  struct Scratch {
    int64_t rows = -1, rowScales = -1, groupSums = -1, groupScales = -1, groupInverses = -1, nibbles = -1,
            tileSums = -1;
    int64_t bytes = 0;
  };
  Scratch scratch() const {
    Scratch s;
    auto take = [&](int64_t bytes) {
      const int64_t at = s.bytes;
      s.bytes += (bytes + 63) / 64 * 64;
      return at;
    };
    const int64_t chunkRows = rowBlocksPerChunk_ * MR_, sumsPerGroup = digits_ ? kDigits : 1;
    s.rows = take(chunkRows * rowStride_);
    if (i8_ && !(digits_ && i4_)) s.rowScales = take(chunkRows * 4);
    if (groupSumsNeeded()) s.groupSums = take(chunkRows * groups_ * sumsPerGroup * 4);
    if (digits_) {
      s.groupScales = take(chunkRows * groups_ * 4);
      s.groupInverses = take(groups_ * 4);
    }
    if (unpacksPanels()) s.nibbles = take(layout_.paddedK() / layout_.kPack * maxVectors() * W_ * 4);
    // Two row tiles' sums, or a block's three digit-row tiles' (digit products over i8).
    if (tiles_) s.tileSums = take((digits_ && !i4_ ? kDigits : 2) * kTileRows * sumRowBytes());
    return s;
  }

protected:
  // Panels of one tile function call (tileFunction), G: up to 16, and no more than a
  // quarter of L2 of packed B, so that the next row block finds the group's panels in
  // L2 (64×4096×4096 bf16: 2 panels of 256 KiB; with 16, 1,080 → 804 GFLOP/s).
  // Its sums are [32 rows][G · NR].
  int64_t tilePanelGroup() const {
    const int64_t l2 = hostL2BytesOr(1024 * 1024);
    return std::clamp<int64_t>(l2 / 4 / panelBytes(), 1, 16);
  }
  int64_t sumRowBytes() const { return tilePanelGroup() * shape_.NR * 4; }
  // Where panel g (of the group) and row i of the sums are: [32 rows][G · NR] i32, or
  // under i4 weights [G][32 rows][NR] f32, which every scale group adds to: rows of a
  // panel G · NR · 4 bytes apart would share a few L1 sets (2 KiB apart: 2 of 64).
  int64_t sumsPanelBytes() const { return i4_ ? 2 * kTileRows * shape_.NR * 4 : shape_.NR * 4; }
  int64_t sumsRowBytes() const { return i4_ ? shape_.NR * 4 : sumRowBytes(); }
  int64_t panelBytes() const { return bytesFor(layout_.panelElements(), layout_.type); }
  // i4 × i8 with byte pairs over several row blocks a chunk: each panel's nibbles are
  // split into bytes once, into nibbles_ (L1/L2), which the blocks then load, instead of
  // every block splitting them again: 3 of a step's 15 vector operations in a block of
  // 3 rows (Zen 3, 1 thread, 128 × 5632 × 2048: GemmDotTest, docs/lowering.md "Byte pairs").
  static constexpr int64_t kMaxUnpackedBytes = 256 * 1024;
  int maxVectors() const { return int((pairedPanels_ ? 2 : 1) * shape_.NR / W_); }
  bool unpacksPanels() const {
    return i4_ && pairs_ && !digits_ && rowBlocksPerChunk_ > 1 &&
           layout_.paddedK() / layout_.kPack * maxVectors() * W_ * 4 <= kMaxUnpackedBytes;
  }
  // Whether the kernel keeps each row's Σq_a (digit products: Σd) per scale group: the
  // vector kernels over i4 weights, whose nibbles hold q + 8, take 8·Σ away; the tile
  // kernels split the nibbles into signed bytes first.
  bool groupSumsNeeded() const { return i4_ && !tiles_; }
  // i8 × i8 byte pairs: a converted row is q_a, then |q_a| rowBytes_ on (dot).
  bool signedPairs() const { return pairs_ && !i4_; }

  const GemmSpec& spec_;
  const MicroKernelShape& shape_;
  PanelLayout layout_;
  const bool tiles_;  // AMX (usesTiles)
  const bool pairs_;  // byte products as vpmaddubsw pairs (bytePairProducts); i8 activations stored signed
  const int64_t MR_;  // rows per row block: kTileRows with tiles, else shape_.MR
  const bool digits_; // f32 activations × i4 weights as digit products (usesDigitProducts)
  const bool i8_;     // activations as bytes (i8, or digits_), i32 accumulators
  const bool i4_;     // i4 weights (emitGroupedBlock)
  const int W_;
  int64_t rowBytes_ = 0, rowBlocksPerChunk_ = 1;
  int64_t rowStride_ = 0;  // a converted row's bytes: rowBytes_, × kDigits with digits_
  int64_t groups_ = 0;     // i8 × i4: scale groups along K
  bool pairedPanels_ = false; // full panels two a block (pairsFullPanels)
};

class DotGemmBuilder : DotKernelGeometry {
public:
  DotGemmBuilder(llvm::Function* fn, const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features,
                 bool tiles, bool pairs)
      : DotKernelGeometry(spec, shape, features, tiles, pairs),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)), math_(b_, *fn->getParent(), shape.fma),
        fn_(fn), vecF_(llvm::FixedVectorType::get(b_.getFloatTy(), unsigned(W_))),
        vecI_(llvm::FixedVectorType::get(b_.getInt32Ty(), unsigned(W_))), accTy_(i8_ ? vecI_ : vecF_) {
    auto arg = fn->arg_begin();
    A_ = arg++; B_ = arg++; bias_ = arg++; residual_ = arg++; C_ = arg++; aPack_ = arg++;
    panelBegin_ = arg++; panelEnd_ = arg++; rowBlockBegin_ = arg++; rowBlockEnd_ = arg++;
  }

  void emit() {
    const int64_t MR = MR_;
    const Scratch scratch = this->scratch();
    auto part = [&](int64_t offset, const char* name) {
      return offset < 0 ? nullptr : b_.CreateGEP(b_.getInt8Ty(), aPack_, i64(offset), name);
    };
    aRows_ = part(scratch.rows, "arows");
    rowScales_ = part(scratch.rowScales, "ascales");
    groupSums_ = part(scratch.groupSums, "agroupsums");
    groupScales_ = part(scratch.groupScales, "agroupscales");
    groupInverses_ = part(scratch.groupInverses, "ainverses");
    nibbles_ = part(scratch.nibbles, "nibbles");
    tileSums_ = part(scratch.tileSums, "tilesums");
    LoopBuilder loops(b_);
    const int64_t rowBlocks = (spec_.M + MR - 1) / MR;
    fullBlocks_ = spec_.M / MR;
    loops.forChunks(rowBlockBegin_, rowBlockEnd_, rowBlocksPerChunk_, rowBlocks, "ic", [&](Value* begin, Value* end) {
      icBegin_ = begin, icEnd_ = end;
      chunkRow0_ = b_.CreateMul(begin, i64(MR), "chunkrow0");
      convertRows(chunkRow0_, loops.minimum(b_.CreateMul(end, i64(MR)), i64(spec_.M), "chunkrowend"));
      if (tiles_)
        return loops.forChunks(panelBegin_, panelEnd_, tilePanelGroup(), layout_.panels(), "pgroup",
                               [&](Value* p0, Value* p1) { emitTileGroup(p0, p1); });
      forEachPanel(panelBegin_, panelEnd_, [&](Value* p, int64_t columns) { emitPanel(p, columns); });
    });
    b_.CreateRetVoid();
  }

private:

  int vectorsPerPanel() const { return int(shape_.NR / W_); }
  // Where vector j of a block's dot step s lies, stepBytes a step from panel bPanel: of
  // a pair, vectors vectorsPerPanel().. are the next panel's (i4: the byte vector
  // holding vectors j and j + 1 for an even j).
  Value* weightVectorAt(Value* bPanel, Value* s, int64_t stepBytes, int j) {
    const int per = vectorsPerPanel();
    return byteAt(bPanel, b_.CreateAdd(b_.CreateMul(s, i64(stepBytes)),
                                       i64(int64_t(j / per) * panelBytes() + int64_t(j % per) * W_ * 4)));
  }

  // body(p, columns) for panels [begin, end): columns NR, or the last panel's tail; with
  // paired panels, the full ones from the first two at a time (columns 2·NR), the rest
  // one at a time.
  void forEachPanel(Value* begin, Value* end, const std::function<void(Value*, int64_t)>& body) {
    LoopBuilder loops(b_);
    if (pairedPanels_) {
      Value* fullEnd = loops.minimum(end, i64(layout_.fullPanels()), "fullend");
      Value* full = b_.CreateSub(fullEnd, begin); // < 0 when the range starts past them
      Value* pairs = b_.CreateSDiv(b_.CreateSelect(b_.CreateICmpSGT(full, i64(0)), full, i64(0)), i64(2));
      Value* pairedEnd = b_.CreateAdd(begin, b_.CreateMul(pairs, i64(2)), "pairedend");
      loops.forRange(begin, pairedEnd, 2, "panelpair", [&](Value* p) { body(p, 2 * shape_.NR); });
      begin = pairedEnd;
    }
    loops.forRange(begin, end, 1, "panel", [&](Value* p) {
      if (layout_.tailColumns() == 0) return body(p, shape_.NR);
      if (layout_.fullPanels() == 0) return body(p, layout_.tailColumns());
      loops.ifElse(b_.CreateICmpEQ(p, i64(layout_.fullPanels())),
                   [&] { body(p, layout_.tailColumns()); }, [&] { body(p, shape_.NR); });
    });
  }

  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* i32s(int32_t v) { return llvm::ConstantInt::get(vecI_, uint64_t(int64_t(v)), true); }
  Value* floats(float v) { return llvm::ConstantFP::get(vecF_, v); }
  Value* byteAt(Value* base, Value* offset) { return b_.CreateGEP(b_.getInt8Ty(), base, offset); }
  Value* call(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Type*> types, llvm::ArrayRef<Value*> args) {
    return b_.CreateCall(llvm::Intrinsic::getDeclaration(fn_->getParent(), id, types), args);
  }

  // Whether a row of activations holds a NaN: note(v) ORs v's NaN lanes into a vector
  // (and returns them), any() says whether one was seen. Started where it is made.
  struct NaNFlags {
    explicit NaNFlags(DotGemmBuilder& e) : e(e), slot(e.entryAlloca(e.vecI_, "rownan")) { e.b_.CreateStore(e.i32s(0), slot); }
    Value* note(Value* v) {
      Value* nan = e.b_.CreateFCmpUNO(v, v);
      e.b_.CreateStore(e.b_.CreateOr(e.b_.CreateLoad(e.vecI_, slot), e.b_.CreateSExt(nan, e.vecI_)), slot);
      return nan;
    }
    Value* any() { return e.b_.CreateICmpNE(e.b_.CreateOrReduce(e.b_.CreateLoad(e.vecI_, slot)), e.b_.getInt32(0)); }
    DotGemmBuilder& e;
    llvm::AllocaInst* slot;
  };

  // Rows [rowBegin, rowEnd) of A into aRows_ (row r at (r − chunkRow0)·rowStride_): bf16
  // (K rounded, then zeros up to a whole vector), or i8 q + 128 and the row's scale
  // (under i4 weights q itself, and each scale group's Σq in groupSums_ where
  // groupSumsNeeded; i8 × i8 byte pairs q, then |q|).
  // A partial last vector is read with a masked load (zeros past K) and stored whole:
  // rowBytes_ holds K rounded up to W elements.
  void convertRows(Value* rowBegin, Value* rowEnd) {
    LoopBuilder loops(b_);
    const int64_t K = spec_.K, fullK = K / W_ * W_, rem = K % W_;
    loops.forRange(rowBegin, rowEnd, 1, "convrow", [&](Value* r) {
      Value* src = b_.CreateGEP(b_.getFloatTy(), A_, b_.CreateMul(r, i64(K)), "src");
      Value* rel = b_.CreateSub(r, chunkRow0_);
      Value* dst = byteAt(aRows_, b_.CreateMul(rel, i64(rowStride_)));
      auto each = [&](const std::function<void(Value* k, Value* v)>& body) {
        if (fullK > 0)
          loops.forRange(i64(0), i64(fullK), W_, "convk", [&](Value* k) {
            body(k, b_.CreateAlignedLoad(vecF_, b_.CreateGEP(b_.getFloatTy(), src, k), llvm::Align(4)));
          });
        if (rem > 0) body(i64(fullK), loadFirstLanes(b_, vecF_, b_.CreateGEP(b_.getFloatTy(), src, i64(fullK)), rem));
      };
      if (!i8_) {
        return each([&](Value* k, Value* v) {
          Value* h = call(llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_512, {}, {v});
          b_.CreateAlignedStore(h, byteAt(dst, b_.CreateMul(k, i64(2))), llvm::Align(2));
        });
      }
      if (digits_ && i4_) return convertDigits(rel, dst, each);
      // i8: max |a| over the row, then q = roundeven(a · 127 / max) + 128. Digit products
      // over i8 weights: X = roundeven(a · kDigitRange / max) of the row's scale
      // max / kDigitRange, stored as the three bytes of X + 2^23 (unsigned, as
      // vpdpbusd wants; the top one is d2 + 128, which the weights' 128·Σq takes away).
      const double limit = digits_ ? double(kDigitRange) : 127.0;
      // A NaN anywhere in the row makes its scale NaN, so every output of the row is
      // NaN, as in f32 (its digits would otherwise quantise it to 0: a finite result).
      llvm::AllocaInst* maxSlot = entryAlloca(vecF_, "rowmax");
      b_.CreateStore(floats(0), maxSlot);
      NaNFlags nans(*this);
      each([&](Value*, Value* v) {
        Value* m = b_.CreateLoad(vecF_, maxSlot);
        b_.CreateStore(b_.CreateMaxNum(m, call(llvm::Intrinsic::fabs, {vecF_}, {v})), maxSlot);
        nans.note(v);
      });
      Value* max = b_.CreateFPMaxReduce(b_.CreateLoad(vecF_, maxSlot));
      Value* positive = b_.CreateFCmpOGT(max, llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
      Value* inverse = b_.CreateSelect(positive, b_.CreateFDiv(llvm::ConstantFP::get(b_.getFloatTy(), limit), max),
                                       llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
      Value* anyNaN = nans.any();
      b_.CreateStore(b_.CreateSelect(anyNaN, llvm::ConstantFP::getNaN(b_.getFloatTy()),
                                     b_.CreateFDiv(max, llvm::ConstantFP::get(b_.getFloatTy(), limit))),
                     b_.CreateGEP(b_.getFloatTy(), rowScales_, rel));
      Value* inverseVec = b_.CreateVectorSplat(unsigned(W_), inverse);
      auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), unsigned(W_));
      Value* rowSums = groupSumsNeeded() ? b_.CreateGEP(b_.getInt32Ty(), groupSums_, b_.CreateMul(rel, i64(groups_))) : nullptr;
      if (rowSums)
        loops.forRange(i64(0), i64(groups_), 1, "zerosum", [&](Value* g) {
          b_.CreateStore(b_.getInt32(0), b_.CreateGEP(b_.getInt32Ty(), rowSums, g));
        });
      each([&](Value* k, Value* v) {
        Value* q = call(llvm::Intrinsic::roundeven, {vecF_}, {b_.CreateFMul(v, inverseVec)});
        // A NaN activation quantises to 0 (fptosi of NaN would be poison).
        q = b_.CreateSelect(b_.CreateFCmpUNO(q, q), floats(0), q);
        q = b_.CreateFPToSI(q, vecI_);
        q = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, q, i32s(int32_t(limit))),
                                     i32s(-int32_t(limit)));
        if (digits_) {
          Value* biased = b_.CreateAdd(q, i32s(1 << 23));
          for (int d = 0; d < kDigits; ++d)
            b_.CreateAlignedStore(b_.CreateTrunc(b_.CreateLShr(biased, i32s(8 * d)), bytes),
                                  byteAt(dst, b_.CreateAdd(k, i64(d * rowBytes_))), llvm::Align(1));
          return;
        }
        if (rowSums) { // a vector lies in one group (groups are a multiple of 16 k steps)
          Value* slot = b_.CreateGEP(b_.getInt32Ty(), rowSums, b_.CreateUDiv(k, i64(spec_.quantGroup)));
          b_.CreateStore(b_.CreateAdd(b_.CreateLoad(b_.getInt32Ty(), slot), b_.CreateAddReduce(q)), slot);
        }
        if (signedPairs())
          b_.CreateAlignedStore(b_.CreateTrunc(call(llvm::Intrinsic::abs, {vecI_}, {q, b_.getFalse()}), bytes),
                                byteAt(dst, b_.CreateAdd(k, i64(rowBytes_))), llvm::Align(1));
        q = b_.CreateTrunc(i4_ || pairs_ ? q : b_.CreateAdd(q, i32s(128)), bytes); // byte pairs: signed (dot)
        b_.CreateAlignedStore(q, byteAt(dst, k), llvm::Align(1));
      });
    });
  }

  // Digit products over i4 weights (DotGemmEmitter.h): the row's groups' scales s_g = max|a| / kDigitRange
  // (groupScales_; NaN in every group of a row holding a NaN), then X = roundeven(a / s_g),
  // clamped to ±kDigitRange (a NaN gives 0: the row's NaN scales make its outputs NaN),
  // cut as X = d2·65536 + d1·256 + d0 with d0, d1 in [-128, 127]: d0 the low byte taken
  // as signed, d1 the next of (X − d0) / 256, d2 what is left, in [-127, 127]. Digit d
  // of the row goes to dst + d·rowBytes_, and each group's Σd to groupSums_ ([g][d];
  // groupSumsNeeded).
  void convertDigits(Value* rel, Value* dst, const std::function<void(const std::function<void(Value*, Value*)>&)>& each) {
    LoopBuilder loops(b_);
    Value* scales = b_.CreateGEP(b_.getFloatTy(), groupScales_, b_.CreateMul(rel, i64(groups_)));
    Value* sums = groupSumsNeeded() ? b_.CreateGEP(b_.getInt32Ty(), groupSums_, b_.CreateMul(rel, i64(groups_ * kDigits))) : nullptr;
    auto groupOf = [&](Value* k) { return b_.CreateUDiv(k, i64(spec_.quantGroup)); };
    Value* zeroF = llvm::ConstantFP::get(b_.getFloatTy(), 0.0), *range = llvm::ConstantFP::get(b_.getFloatTy(), double(kDigitRange));
    loops.forRange(i64(0), i64(groups_), 1, "zerogroup", [&](Value* g) {
      b_.CreateStore(zeroF, b_.CreateGEP(b_.getFloatTy(), scales, g));
      for (int d = 0; d < kDigits && sums; ++d)
        b_.CreateStore(b_.getInt32(0), b_.CreateGEP(b_.getInt32Ty(), sums, b_.CreateAdd(b_.CreateMul(g, i64(kDigits)), i64(d))));
    });
    // NaN lanes count as 0 in the max, as maxnum would skip them; without NaNs the
    // reduction is a tree of vmaxps instead of 16 maxnum steps one after another (~70
    // cycles a vector). A NaN anywhere in the row makes its groups' scales NaN, so every
    // output of the row is NaN, as in f32 (its digits quantise the NaN to 0: a finite
    // result); the lanes' flags are gathered in a vector, off the max's chain.
    NaNFlags nans(*this);
    each([&](Value* k, Value* v) { // a vector lies in one group (groups are a multiple of 16 k steps)
      Value* slot = b_.CreateGEP(b_.getFloatTy(), scales, groupOf(k));
      Value* magnitude = b_.CreateSelect(nans.note(v), floats(0), call(llvm::Intrinsic::fabs, {vecF_}, {v}));
      auto* max = llvm::cast<llvm::Instruction>(b_.CreateFPMaxReduce(magnitude));
      max->setHasNoNaNs(true);
      b_.CreateStore(b_.CreateMaxNum(b_.CreateLoad(b_.getFloatTy(), slot), max), slot);
    });
    Value* anyNaN = nans.any();
    loops.forRange(i64(0), i64(groups_), 1, "groupscale", [&](Value* g) {
      Value* slot = b_.CreateGEP(b_.getFloatTy(), scales, g);
      Value* max = b_.CreateLoad(b_.getFloatTy(), slot);
      Value* positive = b_.CreateFCmpOGT(max, zeroF);
      b_.CreateStore(b_.CreateSelect(positive, b_.CreateFDiv(range, max), zeroF),
                     b_.CreateGEP(b_.getFloatTy(), groupInverses_, g));
      b_.CreateStore(b_.CreateSelect(anyNaN, llvm::ConstantFP::getNaN(b_.getFloatTy()), b_.CreateFDiv(max, range)), slot);
    });
    auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), unsigned(W_));
    each([&](Value* k, Value* v) {
      Value* g = groupOf(k);
      Value* inverse = b_.CreateVectorSplat(unsigned(W_), b_.CreateLoad(b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), groupInverses_, g)));
      Value* x = call(llvm::Intrinsic::roundeven, {vecF_}, {b_.CreateFMul(v, inverse)});
      x = b_.CreateSelect(b_.CreateFCmpUNO(x, x), floats(0), x);
      x = b_.CreateFPToSI(b_.CreateMinNum(b_.CreateMaxNum(x, floats(-float(kDigitRange))), floats(float(kDigitRange))), vecI_);
      auto lowByte = [&](Value* t) { return b_.CreateSub(b_.CreateAnd(b_.CreateAdd(t, i32s(128)), i32s(255)), i32s(128)); };
      Value* d0 = lowByte(x);
      Value* x1 = b_.CreateAShr(b_.CreateSub(x, d0), i32s(8));
      Value* d1 = lowByte(x1);
      Value* d2 = b_.CreateAShr(b_.CreateSub(x1, d1), i32s(8));
      Value* const digits[kDigits] = {d0, d1, d2};
      for (int d = 0; d < kDigits; ++d) {
        Value* digit = digits[d];
        b_.CreateAlignedStore(b_.CreateTrunc(digit, bytes), byteAt(dst, b_.CreateAdd(k, i64(d * rowBytes_))), llvm::Align(1));
        if (!sums) continue;
        Value* slot = b_.CreateGEP(b_.getInt32Ty(), sums, b_.CreateAdd(b_.CreateMul(g, i64(kDigits)), i64(d)));
        b_.CreateStore(b_.CreateAdd(b_.CreateLoad(b_.getInt32Ty(), slot), b_.CreateAddReduce(digit)), slot);
      }
    });
  }

  llvm::AllocaInst* entryAlloca(llvm::Type* ty, const char* name) {
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return entry.CreateAlloca(ty, nullptr, name);
  }

  // AMX: the chunk's row blocks × panels [p0, p1) (at most tilePanelGroup()), two
  // blocks at a time (digit products: one, whose digit rows fill three tiles), then a
  // lone full block, then the M tail. Padding columns of the last panel are zeros in B
  // (computed, not stored).
  void emitTileGroup(Value* p0, Value* p1) {
    LoopBuilder loops(b_);
    if (fullBlocks_ > 0) {
      Value* end = loops.minimum(icEnd_, i64(fullBlocks_), "icfullend");
      const int64_t together = digits_ ? 1 : 2;
      Value* count = b_.CreateSelect(b_.CreateICmpSGT(end, icBegin_), b_.CreateSub(end, icBegin_), i64(0));
      Value* pairEnd = b_.CreateAdd(icBegin_, b_.CreateMul(b_.CreateSDiv(count, i64(together)), i64(together)), "pairend");
      loops.forRange(icBegin_, pairEnd, together, "rowpair", [&](Value* blk) {
        emitTileBlock(b_.CreateMul(blk, i64(kTileRows), "row0"), std::vector<int64_t>(size_t(together), kTileRows), p0, p1);
      }, 1);
      if (together > 1)
        loops.ifElse(b_.CreateICmpSLT(pairEnd, end),
                     [&] { emitTileBlock(b_.CreateMul(pairEnd, i64(kTileRows)), {kTileRows}, p0, p1); }, [] {});
    }
    if (const int64_t tailRows = spec_.M % kTileRows; tailRows > 0)
      loops.ifElse(b_.CreateICmpSGT(icEnd_, i64(fullBlocks_)),
                   [&] { emitTileBlock(i64(fullBlocks_ * kTileRows), {tailRows}, p0, p1); }, [] {});
  }

  // Rows row0.. in row tiles of `tileRows` rows each × panels [p0, p1): the whole tile
  // steps of K in one call of a function of their own (tileFunction), which leaves the
  // C tiles in tileSums_; per panel, the last steps of K that do not fill a tile step
  // (K / kPack not a multiple of 16) with the vector dot instruction on those sums, and
  // the epilogue.
  void emitTileBlock(Value* row0, const std::vector<int64_t>& tileRows, Value* p0, Value* p1) {
    Value* rel0 = b_.CreateSub(row0, chunkRow0_);
    std::vector<Value*> args;
    for (size_t i = 0; i < tileArguments(tileRows); ++i)
      args.push_back(byteAt(aRows_, b_.CreateMul(b_.CreateAdd(rel0, i64(int64_t(i) * kTileRows)), i64(rowStride_))));
    args.push_back(byteAt(B_, b_.CreateMul(p0, i64(panelBytes()))));
    args.push_back(b_.CreateSub(p1, p0));
    args.push_back(tileSums_);
    if (i4_) args.push_back(B_), args.push_back(p0);
    if (digits_ && i4_) args.push_back(b_.CreateGEP(b_.getFloatTy(), groupScales_, b_.CreateMul(rel0, i64(groups_))));
    b_.CreateCall(i4_ ? groupedTileFunction(tileRows) : tileFunction(tileRows), args);
    int64_t rows = 0;
    for (int64_t r : tileRows) rows += r;
    const int64_t stepBytes = shape_.NR * 4;
    // i4: the tile function summed every group, scales applied (f32 sums).
    const int64_t steps = layout_.paddedK() / layout_.kPack, firstTail = i4_ ? steps : steps / 16 * 16;
    forEachPanel(p0, p1, [&](Value* p, int64_t columns) {
      vectors_ = int((columns + W_ - 1) / W_);
      Value* bPanel = byteAt(B_, b_.CreateMul(p, i64(panelBytes())));
      Value* sums = byteAt(tileSums_, b_.CreateMul(b_.CreateSub(p, p0), i64(sumsPanelBytes())));
      Value* n0 = b_.CreateMul(p, i64(shape_.NR), "n0");
      emitEpilogue(row0, rows, n0, columns, [&](int64_t i, int j) {
        // Sums row `sumRow`, with the steps past the whole tile steps of the converted row at aRow.
        auto rowSums = [&](int64_t sumRow, Value* aRow) {
          Value* acc = b_.CreateAlignedLoad(i4_ ? vecF_ : accTy_,
                                            byteAt(sums, i64(sumRow * sumsRowBytes() + int64_t(j) * W_ * 4)), llvm::Align(64));
          for (int64_t st = firstTail; st < steps; ++st)
            acc = dot(acc, b_.CreateAlignedLoad(b_.getInt32Ty(), byteAt(aRow, i64(st * 4)), llvm::Align(4)),
                      b_.CreateAlignedLoad(vecI_, byteAt(bPanel, i64(st * stepBytes + int64_t(j) * W_ * 4)),
                                           llvm::Align(W_ * 4)));
          return acc;
        };
        Value* aRow = byteAt(aRows_, b_.CreateMul(b_.CreateAdd(rel0, i64(i)), i64(rowStride_)));
        if (!digits_ || i4_) return rowSums(i, aRow);
        Value* t[kDigits]; // digit products over i8: row i's three digit rows
        for (int d = 0; d < kDigits; ++d) t[d] = rowSums(kDigits * i + d, byteAt(aRow, i64(d * rowBytes_)));
        return i8DigitProducts(n0, j, t);
      });
    });
  }

  // A tile function of this kernel's module: internal, never inlined (its tile
  // configuration is its own), void name(A tile rows' base per row tile..., B of the
  // first panel, panels, sums, extra...), with an empty entry block.
  llvm::Function* createTileFunction(const std::string& name, size_t rowTiles, llvm::ArrayRef<llvm::Type*> extra) {
    llvm::LLVMContext& ctx = fn_->getContext();
    auto* ptr = llvm::PointerType::getUnqual(ctx);
    std::vector<llvm::Type*> params(rowTiles + 1, ptr);
    params.push_back(llvm::Type::getInt64Ty(ctx));
    params.push_back(ptr);
    params.insert(params.end(), extra.begin(), extra.end());
    auto* f = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false),
                                     llvm::Function::InternalLinkage, name, *fn_->getParent());
    f->addFnAttr(llvm::Attribute::NoInline);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::BasicBlock::Create(ctx, "entry", f);
    return f;
  }
  static std::string tileFunctionName(const char* kind, const std::vector<int64_t>& tileRows) {
    std::string name = kind;
    for (int64_t r : tileRows) name += "_" + std::to_string(r);
    return name;
  }
  llvm::Function* intrinsic(llvm::Intrinsic::ID id) { return llvm::Intrinsic::getDeclaration(fn_->getParent(), id); }

  // A tile function's row tiles (A's first row, rows, first row of the i32 sums), in
  // passes of at most two (2 A + 2 B + 4 C tiles: all 8 registers), from its A
  // arguments at `arg`: one per row tile; with digit products one, the block's digit
  // rows (row r's digit d is digit row kDigits·r + d, convertRows), whose 48 rows are
  // three whole tiles (a tail block's rows past M are multiplied, never read back).
  struct RowTile {
    Value* a;
    int64_t rows, sumRow;
  };
  std::vector<std::vector<RowTile>> rowTilePasses(llvm::IRBuilder<>& b, llvm::Function::arg_iterator& arg,
                                                  const std::vector<int64_t>& tileRows) {
    std::vector<std::vector<RowTile>> passes(1);
    auto add = [&](Value* a, int64_t rows, int64_t sumRow) {
      if (passes.back().size() == 2) passes.emplace_back();
      passes.back().push_back({a, rows, sumRow});
    };
    if (digits_) {
      Value* digitRows = arg++;
      for (int64_t t = 0; t < kDigits; ++t)
        add(b.CreateGEP(b.getInt8Ty(), digitRows, b.getInt64(t * kTileRows * rowBytes_)), kTileRows, t * kTileRows);
    } else {
      for (size_t i = 0; i < tileRows.size(); ++i) add(arg++, tileRows[i], int64_t(i) * kTileRows);
    }
    return passes;
  }
  // A tile function's A arguments: one per row tile, or the digit rows'.
  size_t tileArguments(const std::vector<int64_t>& tileRows) const { return digits_ ? 1 : tileRows.size(); }

  // void f(A tile rows' base per row tile..., B of the first panel, panels, sums): per
  // panel g, the C tiles = the rows × the panel over the whole tile steps of K (16 dot
  // steps each), stored to sums at column g · NR ([32 rows][G · NR], sumRowBytes() a
  // row; digit products over i8 weights: the block's digit rows, [48 rows][G · NR]). A
  // function of its own because a function's tile configuration (LLVM inserts
  // one ldtilecfg at its entry, ~60 ns with the release at its exit) gives each of the 8
  // tile registers one shape: the 16-row blocks and the M tail's shorter tiles would
  // have to share them. One call covers a group of panels so that the configuration is
  // paid once per group (MLP 784→256→128→10, batch 1, bf16: one call per layer).
  llvm::Function* tileFunction(const std::vector<int64_t>& tileRows) {
    const std::string name = tileFunctionName(digits_ ? "digittiles" : "tiles", tileRows);
    if (llvm::Function* existing = fn_->getParent()->getFunction(name)) return existing;
    llvm::LLVMContext& ctx = fn_->getContext();
    const size_t colTiles = size_t(shape_.NR / 16);
    llvm::Function* f = createTileFunction(name, tileArguments(tileRows), {});
    llvm::IRBuilder<> b(&f->getEntryBlock());
    llvm::Function *load = intrinsic(llvm::Intrinsic::x86_tileloadd64_internal),
                   *zero = intrinsic(llvm::Intrinsic::x86_tilezero_internal),
                   *store = intrinsic(llvm::Intrinsic::x86_tilestored64_internal),
                   *tdp = intrinsic(i8_ ? llvm::Intrinsic::x86_tdpbusd_internal : llvm::Intrinsic::x86_tdpbf16ps_internal);
    auto i16 = [&](int64_t v) { return b.getInt16(uint16_t(v)); };
    auto at = [&](Value* base, Value* offset) { return b.CreateGEP(b.getInt8Ty(), base, offset); };
    auto arg = f->arg_begin();
    const std::vector<std::vector<RowTile>> passes = rowTilePasses(b, arg, tileRows);
    Value* bFirst = arg++;
    Value* panels = arg++;
    Value* sums = arg++;
    const int64_t stepBytes = shape_.NR * 4, tileSteps = layout_.paddedK() / layout_.kPack / 16;
    LoopBuilder(b).forRange(b.getInt64(0), panels, 1, "g", [&](Value* g) {
      Value* bPanel = at(bFirst, b.CreateMul(g, b.getInt64(panelBytes())));
      for (const std::vector<RowTile>& pass : passes) {
        std::vector<Value*> c(pass.size() * colTiles);
        for (size_t i = 0; i < pass.size(); ++i)
          for (size_t j = 0; j < colTiles; ++j) c[i * colTiles + j] = b.CreateCall(zero, {i16(pass[i].rows), i16(64)});
        if (tileSteps > 0) {
          // The K loop by hand: its C tiles are loop-carried x86_amx values (phis).
          llvm::BasicBlock* entry = b.GetInsertBlock();
          auto* body = llvm::BasicBlock::Create(ctx, "k", f);
          auto* exit = llvm::BasicBlock::Create(ctx, "k.exit", f);
          b.CreateBr(body);
          b.SetInsertPoint(body);
          llvm::PHINode* t = b.CreatePHI(b.getInt64Ty(), 2, "t");
          t->addIncoming(b.getInt64(0), entry);
          std::vector<llvm::PHINode*> phis(c.size());
          for (size_t x = 0; x < c.size(); ++x) {
            phis[x] = b.CreatePHI(c[x]->getType(), 2, "c");
            phis[x]->addIncoming(c[x], entry);
          }
          Value* aOffset = b.CreateMul(t, b.getInt64(64));
          Value* bOffset = b.CreateMul(t, b.getInt64(16 * stepBytes));
          std::vector<Value*> a(pass.size()), w(colTiles);
          for (size_t i = 0; i < pass.size(); ++i)
            a[i] = b.CreateCall(load, {i16(pass[i].rows), i16(64), at(pass[i].a, aOffset), b.getInt64(rowBytes_)});
          for (size_t j = 0; j < colTiles; ++j)
            w[j] = b.CreateCall(load, {i16(16), i16(64), at(bPanel, b.CreateAdd(bOffset, b.getInt64(int64_t(j) * 64))),
                                       b.getInt64(stepBytes)});
          for (size_t i = 0; i < pass.size(); ++i)
            for (size_t j = 0; j < colTiles; ++j)
              c[i * colTiles + j] =
                  b.CreateCall(tdp, {i16(pass[i].rows), i16(64), i16(64), phis[i * colTiles + j], a[i], w[j]});
          Value* next = b.CreateAdd(t, b.getInt64(1), "t.next", true, true);
          t->addIncoming(next, body);
          for (size_t x = 0; x < c.size(); ++x) phis[x]->addIncoming(c[x], body);
          b.CreateCondBr(b.CreateICmpSLT(next, b.getInt64(tileSteps)), body, exit);
          b.SetInsertPoint(exit);
          for (size_t x = 0; x < c.size(); ++x) {
            llvm::PHINode* out = b.CreatePHI(c[x]->getType(), 1, "c.out");
            out->addIncoming(c[x], body);
            c[x] = out;
          }
        }
        Value* column = b.CreateMul(g, b.getInt64(shape_.NR * 4));
        for (size_t i = 0; i < pass.size(); ++i)
          for (size_t j = 0; j < colTiles; ++j)
            b.CreateCall(store, {i16(pass[i].rows), i16(64),
                                 at(sums, b.CreateAdd(column, b.getInt64(pass[i].sumRow * sumRowBytes() + int64_t(j) * 64))),
                                 b.getInt64(sumRowBytes()), c[i * colTiles + j]});
      }
    }, 1);
    b.CreateRetVoid();
    return f;
  }

  // i8 × i4 on tiles: void f(A tile rows' base per row tile..., B of the first panel,
  // panels, sums, B, first panel). Per panel g and scale group q: the group's dot steps
  // split into signed bytes (nibble − 8) in a stack buffer laid out as an i8 panel's
  // steps (NR·4 bytes each, vector j the j-th 16 channels), the C tiles summed over the
  // group with tdpbssd (q_a × q_w, exact in i32) in whole tile steps of up to 64 k,
  // stored, converted and added × the channels' group scales to the f32 sums
  // (sumsPanelBytes(); × s_a in the epilogue). Signed weights cost one
  // subtraction per step here instead of −8·Σq_a per row and group.
  // Digit products over i4 weights: void f(the block's digit rows, B of the first panel,
  // panels, sums, B, first panel, the block's s_g [rows][groups_]), the digit rows'
  // three tiles in two passes (rowTilePasses). At the group's end T = 65536·T2 +
  // (256·T1 + T0) × group scale × s_g goes to the f32 sums. The integer sums are the
  // vector kernels' exactly, and so are the f32 steps after them (i4DigitProducts): the
  // same bits as a block of decode rows.
  // Tile loads and stores do not forward to and from vector ones: a tile load waits
  // for the vector stores before it to reach L1, and so does a vector load for a tile
  // store. So the steps are a pipeline over two buffers of each: while group q's tiles
  // run, group q + 1 is split and group q − 1's sums are converted, this vector work
  // placed between the first pass's products and their stores, where it runs beside them
  // (1 thread, 128 × 5632 × 2048, digit products: after the stores 12.2 ms, between
  // 10.5; i8 × i4 3.9-4.3 → 3.9).
  llvm::Function* groupedTileFunction(const std::vector<int64_t>& tileRows) {
    const std::string name = tileFunctionName(digits_ ? "groupdigittiles" : "grouptiles", tileRows);
    if (llvm::Function* existing = fn_->getParent()->getFunction(name)) return existing;
    llvm::LLVMContext& ctx = fn_->getContext();
    auto* ptr = llvm::PointerType::getUnqual(ctx);
    const size_t colTiles = size_t(shape_.NR / 16);
    llvm::Function* f = createTileFunction(name, tileArguments(tileRows),
                                           digits_ ? std::vector<llvm::Type*>{ptr, llvm::Type::getInt64Ty(ctx), ptr}
                                                   : std::vector<llvm::Type*>{ptr, llvm::Type::getInt64Ty(ctx)});
    llvm::IRBuilder<> b(&f->getEntryBlock());
    llvm::Function *load = intrinsic(llvm::Intrinsic::x86_tileloadd64_internal),
                   *zero = intrinsic(llvm::Intrinsic::x86_tilezero_internal),
                   *store = intrinsic(llvm::Intrinsic::x86_tilestored64_internal),
                   *tdp = intrinsic(llvm::Intrinsic::x86_tdpbssd_internal);
    auto i16 = [&](int64_t v) { return b.getInt16(uint16_t(v)); };
    auto at = [&](Value* base, Value* offset) { return b.CreateGEP(b.getInt8Ty(), base, offset); };
    auto atC = [&](Value* base, int64_t offset) { return at(base, b.getInt64(offset)); };
    auto arg = f->arg_begin();
    const std::vector<std::vector<RowTile>> passes = rowTilePasses(b, arg, tileRows);
    Value* bFirst = arg++;
    Value* panels = arg++;
    Value* sums = arg++;
    Value* packed = arg++;
    Value* firstPanel = arg++;
    Value* rowGroupScales = digits_ ? static_cast<Value*>(arg++) : nullptr;
    const int64_t group = spec_.quantGroup, groupSteps = group / layout_.kPack;
    const int64_t chunkK = std::min(group, kTileBytes), stepBytes = shape_.NR * 4;
    const int64_t sumRows = passes.back().back().sumRow + kTileRows;
    const int64_t splitBytes = groupSteps * stepBytes, intBytes = sumRows * stepBytes;
    auto* bytes = llvm::FixedVectorType::get(b.getInt8Ty(), unsigned(4 * W_));
    auto* split = b.CreateAlloca(llvm::ArrayType::get(b.getInt8Ty(), uint64_t(2 * splitBytes)), nullptr, "split");
    split->setAlignment(llvm::Align(64));
    auto* ints = b.CreateAlloca(llvm::ArrayType::get(b.getInt8Ty(), uint64_t(2 * intBytes)), nullptr, "groupsums");
    ints->setAlignment(llvm::Align(64));
    // Buffer (q mod 2) of a pair.
    auto half = [&](Value* base, Value* q, int64_t bytesEach) {
      return at(base, b.CreateMul(b.CreateAnd(q, b.getInt64(1)), b.getInt64(bytesEach)));
    };
    LoopBuilder(b).forRange(b.getInt64(0), panels, 1, "g", [&](Value* g) {
      Value* bPanel = at(bFirst, b.CreateMul(g, b.getInt64(panelBytes())));
      Value* out = at(sums, b.CreateMul(g, b.getInt64(sumsPanelBytes())));
      Value* panel = b.CreateAdd(firstPanel, g);
      // Group q's steps into split buffer q mod 2; low nibbles: channels 0-15, high: 16-31.
      auto splitGroup = [&](Value* q) {
        Value* nibbles0 = at(bPanel, b.CreateMul(q, b.getInt64(groupSteps * shape_.NR * 2)));
        Value* dst = half(split, q, splitBytes);
        for (int64_t st = 0; st < groupSteps; ++st) {
          Value* nibbles = b.CreateAlignedLoad(vecI_, atC(nibbles0, st * shape_.NR * 2), llvm::Align(64));
          Value* halves[2] = {nibbles, b.CreateLShr(nibbles, llvm::ConstantInt::get(vecI_, 4))};
          for (int j = 0; j < 2; ++j) {
            Value* q4 = b.CreateBitCast(b.CreateAnd(halves[j], llvm::ConstantInt::get(vecI_, 0x0f0f0f0f)), bytes);
            b.CreateAlignedStore(b.CreateSub(q4, llvm::ConstantInt::get(bytes, 8)), atC(dst, st * stepBytes + j * 64),
                                 llvm::Align(64));
          }
        }
      };
      // Group q's i32 sums (buffer q mod 2) × its scales into the f32 sums, which the
      // first group starts (from zero, as the vector kernels' sums do).
      auto convertGroup = [&](Value* q, bool first) {
        Value* src = half(ints, q, intBytes);
        // A panel's scales of group q start at scale index (panel · groups + q) · NR.
        Value* firstScale = b.CreateMul(b.CreateAdd(b.CreateMul(panel, b.getInt64(groups_)), q), b.getInt64(shape_.NR));
        std::vector<Value*> scales(colTiles);
        for (size_t j = 0; j < colTiles; ++j)
          scales[j] = loadScales(b, layout_, packed, b.CreateAdd(firstScale, b.getInt64(int64_t(j) * W_)), W_);
        auto intRow = [&](int64_t r, size_t j) {
          return b.CreateAlignedLoad(vecI_, atC(src, r * stepBytes + int64_t(j) * 64), llvm::Align(64));
        };
        const int64_t rows = digits_ ? tileRows[0] : sumRows;
        for (int64_t r = 0; r < rows; ++r) {
          if (!digits_ && r % kTileRows >= tileRows[size_t(r / kTileRows)]) continue;
          Value* rowScale = digits_ ? b.CreateVectorSplat(unsigned(W_), b.CreateLoad(b.getFloatTy(), b.CreateGEP(
                                                              b.getFloatTy(), rowGroupScales,
                                                              b.CreateAdd(b.getInt64(r * groups_), q))))
                                    : nullptr;
          for (size_t j = 0; j < colTiles; ++j) {
            Value* products = nullptr;
            if (digits_) {
              Value* t[kDigits];
              for (int d = 0; d < kDigits; ++d) t[d] = intRow(kDigits * r + d, j);
              products = i4DigitProducts(b, t);
            } else {
              products = b.CreateSIToFP(intRow(r, j), vecF_);
            }
            Value* dst = atC(out, r * sumsRowBytes() + int64_t(j) * 64);
            Value* sofar = first ? static_cast<Value*>(llvm::Constant::getNullValue(vecF_))
                                 : b.CreateAlignedLoad(vecF_, dst, llvm::Align(64));
            b.CreateAlignedStore(b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vecF_},
                                                   {products, digits_ ? b.CreateFMul(scales[j], rowScale) : scales[j], sofar}),
                                 dst, llvm::Align(64));
          }
        }
      };
      splitGroup(b.getInt64(0));
      LoopBuilder loops(b);
      loops.forRange(b.getInt64(0), b.getInt64(groups_), 1, "q", [&](Value* q) {
        Value* next = b.CreateAdd(q, b.getInt64(1));
        Value* previous = b.CreateSub(q, b.getInt64(1));
        Value* splitNow = half(split, q, splitBytes);
        Value* intsNow = half(ints, q, intBytes);
        for (const std::vector<RowTile>& pass : passes) {
          std::vector<Value*> c(pass.size() * colTiles);
          for (size_t i = 0; i < pass.size(); ++i)
            for (size_t j = 0; j < colTiles; ++j) c[i * colTiles + j] = b.CreateCall(zero, {i16(pass[i].rows), i16(64)});
          for (int64_t k0 = 0; k0 < group; k0 += chunkK) {
            std::vector<Value*> a(pass.size()), w(colTiles);
            Value* aOffset = b.CreateAdd(b.CreateMul(q, b.getInt64(group)), b.getInt64(k0));
            for (size_t i = 0; i < pass.size(); ++i)
              a[i] = b.CreateCall(load, {i16(pass[i].rows), i16(chunkK), at(pass[i].a, aOffset), b.getInt64(rowBytes_)});
            for (size_t j = 0; j < colTiles; ++j)
              w[j] = b.CreateCall(load, {i16(chunkK / 4), i16(64), atC(splitNow, k0 / 4 * stepBytes + int64_t(j) * 64),
                                         b.getInt64(stepBytes)});
            for (size_t i = 0; i < pass.size(); ++i)
              for (size_t j = 0; j < colTiles; ++j)
                c[i * colTiles + j] = b.CreateCall(tdp, {i16(pass[i].rows), i16(64), i16(chunkK), c[i * colTiles + j], a[i], w[j]});
          }
          // While the first pass's products run: split group q + 1, convert group q − 1.
          if (&pass == &passes[0]) {
            loops.ifElse(b.CreateICmpSLT(next, b.getInt64(groups_)), [&] { splitGroup(next); }, [] {});
            loops.ifElse(b.CreateICmpEQ(q, b.getInt64(1)), [&] { convertGroup(previous, true); }, [&] {
              loops.ifElse(b.CreateICmpSGT(q, b.getInt64(1)), [&] { convertGroup(previous, false); }, [] {});
            });
          }
          for (size_t i = 0; i < pass.size(); ++i)
            for (size_t j = 0; j < colTiles; ++j)
              b.CreateCall(store, {i16(pass[i].rows), i16(64), atC(intsNow, pass[i].sumRow * stepBytes + int64_t(j) * 64),
                                   b.getInt64(stepBytes), c[i * colTiles + j]});
        }
      }, 1);
      convertGroup(b.getInt64(groups_ - 1), groups_ == 1);
    }, 1);
    b.CreateRetVoid();
    return f;
  }

  // Digit products over i4 weights: a group's products in f32 from its digits' i32 sums
  // T0, T1, T2: 65536·T2 + (256·T1 + T0), the bracket exact in i32 for groups of up to
  // kMaxDigitGroup steps. The vector and tile kernels share it, so their sums agree bit
  // for bit.
  Value* i4DigitProducts(llvm::IRBuilder<>& b, Value* const (&t)[kDigits]) {
    Value* low = b.CreateSIToFP(b.CreateAdd(b.CreateShl(t[1], llvm::ConstantInt::get(vecI_, 8)), t[0]), vecF_);
    return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vecF_},
                             {b.CreateSIToFP(t[2], vecF_), llvm::ConstantFP::get(vecF_, 65536.0), low});
  }

  // acc + the dot products of one dot step: a row's kPack activations (32 bits,
  // broadcast) against the kPack weights in each 32-bit lane of `w`.
  // i8 × i8 byte pairs (signedPairs) also take the row's |q_a| (abs32), stored next to
  // q_a by convertRows: one vpabsb fewer a row and step, which shares a port with the
  // products (Zen 3, 1 thread, 128 × 5632 × 2048 in blocks of 6: 123-130 → 130-133 GFLOP/s).
  Value* dot(Value* acc, Value* a32, Value* w, Value* abs32 = nullptr) {
    Value* a = b_.CreateVectorSplat(unsigned(W_), a32);
    if (pairs_) { // i8 × i8 (bytePairProducts): |q_a| × (q_w with q_a's sign), pairs ≤ 2·127·127
      if (!abs32) throw std::logic_error("gemm: i8 × i8 byte pairs need the row's |q_a|");
      auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), unsigned(4 * W_));
      Value* qa = b_.CreateBitCast(a, bytes);
      Value* pair = call(llvm::Intrinsic::x86_avx2_pmadd_ub_sw, {},
                         {b_.CreateBitCast(b_.CreateVectorSplat(unsigned(W_), abs32), bytes),
                          call(llvm::Intrinsic::x86_avx2_psign_b, {}, {b_.CreateBitCast(w, bytes), qa})});
      auto* words = llvm::FixedVectorType::get(b_.getInt16Ty(), unsigned(2 * W_));
      return b_.CreateAdd(acc, call(llvm::Intrinsic::x86_avx2_pmadd_wd, {}, {pair, llvm::ConstantInt::get(words, 1)}));
    }
    if (i8_)
      return call(W_ == 16 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512 : llvm::Intrinsic::x86_avx512_vpdpbusd_256, {},
                  {acc, a, w});
    auto* pairs = llvm::FixedVectorType::get(b_.getBFloatTy(), unsigned(2 * W_));
    return call(llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512, {},
                {acc, b_.CreateBitCast(a, pairs), b_.CreateBitCast(w, pairs)});
  }

  // Every dot step's vectors of the panel(s) at bPanel into nibbles_: vector j of step s
  // at s · vectors_ + j, as nibbleStep makes them.
  void unpackPanel(Value* bPanel) {
    const int64_t steps = layout_.paddedK() / layout_.kPack;
    LoopBuilder(b_).forRange(i64(0), i64(steps), 1, "unpack", [&](Value* s) {
      const std::vector<Value*> w = splitNibbles(bPanel, s);
      for (int j = 0; j < vectors_; ++j)
        b_.CreateAlignedStore(w[size_t(j)], unpackedAt(s, j), llvm::Align(W_ * 4));
    });
  }
  Value* unpackedAt(Value* s, int j) {
    return b_.CreateGEP(vecI_, nibbles_, b_.CreateAdd(b_.CreateMul(s, i64(vectors_)), i64(j)));
  }

  // The chunk's row blocks × one panel with `columns` valid columns.
  void emitPanel(Value* panel, int64_t columns) {
    LoopBuilder loops(b_);
    vectors_ = int((columns + W_ - 1) / W_);
    Value* n0 = b_.CreateMul(panel, i64(shape_.NR), "n0");
    Value* bPanel = byteAt(B_, b_.CreateMul(panel, i64(panelBytes())));
    if (nibbles_) unpackPanel(bPanel);
    if (fullBlocks_ > 0)
      loops.forRange(icBegin_, loops.minimum(icEnd_, i64(fullBlocks_), "icfullend"), 1, "rowblock", [&](Value* blk) {
        emitBlock(b_.CreateMul(blk, i64(shape_.MR), "row0"), shape_.MR, n0, bPanel, columns);
      });
    if (const int64_t tailRows = spec_.M % shape_.MR; tailRows > 0)
      loops.ifElse(b_.CreateICmpSGT(icEnd_, i64(fullBlocks_)),
                   [&] { emitBlock(i64(fullBlocks_ * shape_.MR), tailRows, n0, bPanel, columns); }, [] {});
  }

  // The converted rows rel0 .. rel0 + rows − 1 of the chunk.
  std::vector<Value*> convertedRows(Value* rel0, int64_t rows) {
    std::vector<Value*> aRow(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i)
      aRow[size_t(i)] = byteAt(aRows_, b_.CreateMul(b_.CreateAdd(rel0, i64(i)), i64(rowStride_)));
    return aRow;
  }

  // rows × (vectors_ · W) accumulators over the K / kPack dot steps, in `sets`
  // independent sets (step s feeds set s % sets), summed in a fixed order.
  void emitBlock(Value* row0, int64_t rows, Value* n0, Value* bPanel, int64_t columns) {
    if (i4_) return emitGroupedBlock(row0, rows, n0, bPanel, columns);
    // Byte pairs' chains are one-cycle vpaddd: blocks of several rows keep one set (two
    // of kPairBlockRows rows spill); a one-row block (decode) keeps accumulatorSets'.
    const int sets = digits_ ? digitSets(rows) : pairs_ && rows > 1 ? 1 : accumulatorSets(rows, shape_, vectors_);
    const size_t perSet = size_t(rows * vectors_ * digitRows()); // accumulatorIndex
    std::vector<std::vector<llvm::AllocaInst*>> acc(static_cast<size_t>(sets), std::vector<llvm::AllocaInst*>(perSet));
    for (auto& set : acc)
      for (auto*& a : set) {
        a = entryAlloca(accTy_, "acc");
        b_.CreateStore(llvm::Constant::getNullValue(accTy_), a);
      }
    Value* rel0 = b_.CreateSub(row0, chunkRow0_);
    const std::vector<Value*> aRow = convertedRows(rel0, rows);
    const int64_t steps = layout_.paddedK() / layout_.kPack, unrolled = steps / kUnrollSteps * kUnrollSteps;
    if (unrolled > 0)
      LoopBuilder(b_).forRange(i64(0), i64(unrolled), kUnrollSteps, "k", [&](Value* s) {
        prefetchSteps(bPanel, s, shape_.NR * 4);
        for (int u = 0; u < kUnrollSteps; ++u) dotStep(b_.CreateAdd(s, i64(u)), aRow, bPanel, acc[size_t(u % sets)]);
      }, 1);
    for (int64_t s = unrolled; s < steps; ++s) dotStep(i64(s), aRow, bPanel, acc[size_t(s % sets)]);
    for (int stride = 1; stride < sets; stride *= 2)
      for (int s = 0; s + stride < sets; s += 2 * stride)
        for (size_t i = 0; i < perSet; ++i) {
          Value* x = b_.CreateLoad(accTy_, acc[size_t(s)][i]);
          Value* y = b_.CreateLoad(accTy_, acc[size_t(s + stride)][i]);
          b_.CreateStore(i8_ ? b_.CreateAdd(x, y) : b_.CreateFAdd(x, y), acc[size_t(s)][i]);
        }
    if (!digits_)
      return emitEpilogue(row0, rows, n0, columns,
                          [&](int64_t i, int j) { return b_.CreateLoad(accTy_, acc[0][size_t(i * vectors_ + j)]); });
    emitEpilogue(row0, rows, n0, columns, [&](int64_t i, int j) {
      Value* t[kDigits];
      for (int d = 0; d < kDigits; ++d) t[d] = b_.CreateLoad(accTy_, acc[0][accumulatorIndex(size_t(i), j, d)]);
      return i8DigitProducts(n0, j, t);
    });
  }

  // Digit products over i8 weights, vector j of the panel at column n0, from a row's
  // three digit sums T0, T1, T2 over K: Σ q·X = 65536·(T2 − 128·Σq) + 256·T1 + T0, the
  // channel's 128·Σq from the layout (the top digit holds d2 + 128); the products' f32
  // sum, which the epilogue scales by s_w · s_a. The vector and tile kernels share it.
  Value* i8DigitProducts(Value* n0, int j, Value* const (&t)[kDigits]) {
    Value* col = b_.CreateAdd(n0, i64(int64_t(j) * W_));
    Value* weightSums = b_.CreateAlignedLoad(
        vecI_, byteAt(B_, b_.CreateAdd(i64(layout_.sumsOffsetBytes()), b_.CreateMul(col, i64(4)))), llvm::Align(W_ * 4));
    Value* high = b_.CreateSIToFP(b_.CreateSub(t[2], weightSums), vecF_);
    Value* low = call(llvm::Intrinsic::fmuladd, {vecF_}, {b_.CreateSIToFP(t[1], vecF_), floats(256.0f), b_.CreateSIToFP(t[0], vecF_)});
    return call(llvm::Intrinsic::fmuladd, {vecF_}, {high, floats(65536.0f), low});
  }

  // i8 × i4: per scale group, rows × vectors_ i32 accumulators (in `sets` sets) over
  // the group's dot steps; then, per row, 8·Σq_a of the group taken away, converted
  // and added × the channels' group scales to the f32 sums the epilogue reads.
  // Digit products: kDigits accumulators a row and vector (digit d of row i, vector j at
  // (i·vectors_ + j)·kDigits + d), the first set starting at −8·Σd of the group; at its
  // end T = 65536·T2 + (256·T1 + T0) (the bracket exact in i32 for groups up to
  // kMaxDigitGroup), × the channels' group scales × s_g, added to the f32 sums.
  void emitGroupedBlock(Value* row0, int64_t rows, Value* n0, Value* bPanel, int64_t columns) {
    const int D = digitRows();
    wholeBytes_ = highNibblesAsWholeBytes(rows);
    // Byte pairs' chains are i16 adds of one cycle: blocks of several rows keep one set,
    // whose widening at each span's end costs half as much (Zen 3, 1 thread, i4 × i8,
    // 128 × 5632 × 2048: 65-81 → 87-90 GMAC/s; TinyLlama prefill 83 → 93 tokens/s). A
    // one-row i4 × i8 block (decode) keeps accumulatorSets' two: 4 % faster from L3.
    const int sets = pairs_ && rows > 1 ? 1 : digits_ ? digitSets(rows) : accumulatorSets(rows, shape_, vectors_);
    const size_t perSet = size_t(rows * vectors_ * D); // accumulatorIndex
    std::vector<llvm::AllocaInst*> sums(size_t(rows * vectors_));
    for (auto*& a : sums) {
      a = entryAlloca(vecF_, "fsum");
      b_.CreateStore(floats(0), a);
    }
    std::vector<std::vector<llvm::AllocaInst*>> acc(static_cast<size_t>(sets), std::vector<llvm::AllocaInst*>(perSet));
    for (auto& set : acc)
      for (auto*& a : set) a = entryAlloca(accTy_, "acc");
    // Byte pairs: each accumulator's i16 pair sums of the current span (nibbleSteps).
    std::vector<std::vector<llvm::AllocaInst*>> pairSums;
    if (pairs_) {
      auto* words = llvm::FixedVectorType::get(b_.getInt16Ty(), unsigned(2 * W_));
      pairSums.assign(acc.size(), std::vector<llvm::AllocaInst*>(perSet));
      for (auto& set : pairSums)
        for (auto*& a : set) a = entryAlloca(words, "pairsum");
    }
    Value* rel0 = b_.CreateSub(row0, chunkRow0_);
    const std::vector<Value*> aRow = convertedRows(rel0, rows);
    Value* panel = b_.CreateSDiv(n0, i64(shape_.NR));
    const int64_t steps = layout_.paddedK() / layout_.kPack, groupSteps = spec_.quantGroup / layout_.kPack;
    // Row i's group-g entry of a [rows of the chunk][groups_][per] array.
    auto rowGroup = [&](Value* base, llvm::Type* ty, int64_t i, Value* g, int64_t per, int64_t d) {
      Value* rowGroupIndex = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(rel0, i64(i)), i64(groups_)), g);
      return b_.CreateLoad(ty, b_.CreateGEP(ty, base, b_.CreateAdd(b_.CreateMul(rowGroupIndex, i64(per)), i64(d))));
    };
    // The group's i32 sums of row i, vector j, digit d over the sets. A high vector read
    // as whole bytes (highNibblesAsWholeBytes) summed lo + 16·hi: its sums less the low
    // vector's are 16 × the high nibbles' (exact in i32 at any group size; digit
    // products start the two at −8·Σd and −136·Σd, which leaves 16 × −8·Σd).
    auto groupSum = [&](size_t i, int j, int d) {
      auto sum = [&](int vector) {
        const size_t x = accumulatorIndex(i, vector, d);
        Value* total = b_.CreateLoad(accTy_, acc[0][x]);
        for (size_t s = 1; s < acc.size(); ++s) total = b_.CreateAdd(total, b_.CreateLoad(accTy_, acc[s][x]));
        return total;
      };
      if (!wholeBytes_ || j % 2 == 0) return sum(j);
      return b_.CreateAShr(b_.CreateSub(sum(j), sum(j - 1)), llvm::ConstantInt::get(accTy_, 4));
    };
    auto group = [&](Value* g, int64_t count) {
      for (size_t set = 0; set < acc.size(); ++set)
        for (size_t x = 0; x < perSet; ++x) {
          Value* start = llvm::Constant::getNullValue(accTy_);
          const int64_t row = int64_t(x) / (vectors_ * D), d = int64_t(x) % D;
          auto digitSum = [&](int64_t digit) { return rowGroup(groupSums_, b_.getInt32Ty(), row, g, D, digit); };
          if (digits_ && set == 0 && !(pairs_ && d == 1)) { // −8·Σd: the nibbles hold q + 8
            // Byte pairs sum digit 1 × 256 into digit 0's accumulator (nibbleSteps).
            Value* sum = pairs_ && d == 0 ? b_.CreateAdd(digitSum(0), b_.CreateMul(digitSum(1), b_.getInt32(256))) : digitSum(d);
            // Whole bytes (highNibblesAsWholeBytes): −136·Σd, the low nibbles' −8·Σd and 16 × the high ones'.
            const int64_t vector = int64_t(x) / D % vectors_;
            const int32_t offset = wholeBytes_ && vector % 2 == 1 ? -136 : -8;
            start = b_.CreateVectorSplat(unsigned(W_), b_.CreateMul(sum, b_.getInt32(offset)));
          }
          b_.CreateStore(start, acc[set][x]);
        }
      Value* first = b_.CreateMul(g, i64(groupSteps));
      // Steps first .. first + n − 1; byte pairs widen their i16 sums at the end.
      auto span = [&](Value* first, int64_t n) {
        if (pairs_)
          for (auto& set : pairSums)
            for (auto* a : set) b_.CreateStore(llvm::Constant::getNullValue(a->getAllocatedType()), a);
        const int64_t unrolled = n / kUnrollSteps * kUnrollSteps;
        if (unrolled > 0)
          LoopBuilder(b_).forRange(i64(0), i64(unrolled), kUnrollSteps, "k", [&](Value* s) {
            prefetchSteps(bPanel, b_.CreateAdd(first, s), shape_.NR * 2);
            nibbleSteps(b_.CreateAdd(first, s), kUnrollSteps, aRow, bPanel, acc, pairSums);
          }, 1);
        if (n > unrolled) nibbleSteps(b_.CreateAdd(first, i64(unrolled)), n - unrolled, aRow, bPanel, acc, pairSums);
        if (pairs_) widenPairSums(pairSums, acc);
      };
      const int64_t spanSteps = pairs_ ? kPairSpanSteps : count, spans = count / spanSteps;
      if (spans == 1) span(first, spanSteps);
      else if (spans > 1)
        LoopBuilder(b_).forRange(i64(0), i64(spans * spanSteps), spanSteps, "span",
                                 [&](Value* s) { span(b_.CreateAdd(first, s), spanSteps); });
      if (count % spanSteps > 0) span(b_.CreateAdd(first, i64(spans * spanSteps)), count % spanSteps);
      // A panel's scales of group g start at scale index (panel · groups + g) · NR (of a
      // pair, the second panel's at (panel + 1)'s).
      const int per = vectorsPerPanel();
      std::vector<Value*> firstScales;
      for (int q = 0; q * per < vectors_; ++q)
        firstScales.push_back(
            b_.CreateMul(b_.CreateAdd(b_.CreateMul(b_.CreateAdd(panel, i64(q)), i64(groups_)), g), i64(shape_.NR)));
      if (spec_.M <= kDecodePrefetchRows) // the scales' own stream (GemmEmitter.h)
        for (Value* firstScale : firstScales)
          emitPrefetchLines(b_,
                            byteAt(B_, b_.CreateAdd(i64(layout_.scalesOffsetBytes() + kScalePrefetchBytes),
                                                    b_.CreateMul(firstScale, i64(layout_.scaleBytes())))),
                            shape_.NR * layout_.scaleBytes());
      std::vector<Value*> scales(static_cast<size_t>(vectors_));
      for (int j = 0; j < vectors_; ++j)
        scales[size_t(j)] = loadScales(b_, layout_, B_, b_.CreateAdd(firstScales[size_t(j / per)], i64(int64_t(j % per) * W_)), W_);
      if (digits_) {
        for (int64_t i = 0; i < rows; ++i) {
          Value* rowScale = b_.CreateVectorSplat(unsigned(W_), rowGroup(groupScales_, b_.getFloatTy(), i, g, 1, 0));
          for (int j = 0; j < vectors_; ++j) {
            Value* t[kDigits];
            for (int d = 0; d < kDigits; ++d) t[d] = groupSum(size_t(i), j, d);
            Value* products = i4DigitProducts(b_, t);
            const size_t y = size_t(i * vectors_ + j);
            b_.CreateStore(call(llvm::Intrinsic::fmuladd, {vecF_},
                                {products, b_.CreateFMul(scales[size_t(j)], rowScale), b_.CreateLoad(vecF_, sums[y])}),
                           sums[y]);
          }
        }
        return;
      }
      for (int64_t i = 0; i < rows; ++i) {
        Value* rowSum = rowGroup(groupSums_, b_.getInt32Ty(), i, g, 1, 0);
        Value* offsetTerm = b_.CreateVectorSplat(unsigned(W_), b_.CreateMul(rowSum, b_.getInt32(8)));
        for (int j = 0; j < vectors_; ++j) {
          const size_t x = size_t(i * vectors_ + j);
          Value* products = b_.CreateSIToFP(b_.CreateSub(groupSum(size_t(i), j, 0), offsetTerm), vecF_);
          b_.CreateStore(call(llvm::Intrinsic::fmuladd, {vecF_}, {products, scales[size_t(j)], b_.CreateLoad(vecF_, sums[x])}),
                         sums[x]);
        }
      }
    };
    const int64_t fullGroups = steps / groupSteps, lastSteps = steps % groupSteps;
    if (fullGroups > 0) LoopBuilder(b_).forRange(i64(0), i64(fullGroups), 1, "group", [&](Value* g) { group(g, groupSteps); });
    if (lastSteps > 0) group(i64(fullGroups), lastSteps);
    emitEpilogue(row0, rows, n0, columns, [&](int64_t i, int j) { return b_.CreateLoad(vecF_, sums[size_t(i * vectors_ + j)]); });
  }

  // Few rows (decode): the weights stream from DRAM once, and vpdpbusd consumes them
  // faster than the hardware prefetcher alone brings them in; each unrolled iteration
  // asks for every line of the iteration kWeightPrefetchBytes ahead, as the f32
  // kernels' widening path does (GemmEmitter.cpp, prefetchB), and i4 blocks the scales'
  // stream as well. Measured (Zen 5 guest, 1 thread, M = 1, 4096×4096 and 11008×4096,
  // copies beyond L3, a busy hour; docs/bench.md, "Storage dtypes"): i4 × i8 18-32 GB/s
  // without, 23-34 with the weights', 32-34 with the scales' too; i8 × i8 alike (31-36).
  static constexpr int64_t kWeightPrefetchBytes = 4096;
  // Digit products over i4 weights spend three vpdpbusd on a step's bytes instead of
  // one, and stream better from two distances: into L1 kDigitNearPrefetchBytes ahead,
  // into L2 kDigitFarPrefetchBytes ahead. Measured (Zen 4 guest, 1 thread, M = 1,
  // peer_bench --dtypes --dtype i4, interleaved; docs/bench.md, "Zen 4, 2026-12-04
  // 10:55-11:53 UTC"): 4096×4096 from DRAM 360-397 µs with L1 only at 4 KiB, 310-346 with 2 KiB
  // and 16 KiB (2 KiB alone 405-411, 2 and 6 KiB 396-419); TinyLlama decode 38.9-41.8 →
  // 46.1-51.7 tok/s.
  static constexpr int64_t kDigitNearPrefetchBytes = 2048, kDigitFarPrefetchBytes = 16384;
  // Paired digit products (pairsFullPanels) read two streams a block; an unrolled
  // iteration asks for each of its lines of both into L1 kPairedDigitPrefetchBytes
  // ahead, and for none into L2: the hardware brings them that far. Measured (Xeon guest
  // with AMX, 1 thread, TinyLlama decode, tokens/s, interleaved; docs/bench.md, "Paired
  // panels for one-row digit products"): i4 from the two distances below 23.7-23.8,
  // 256 B ahead 24.4, 512 B 24.3-26.3, 768 B 26.5-26.7, 1 KiB 24.5-25.4, 2 KiB 25.0-25.4;
  // i8 from two distances 14.6-14.7, 512 B 15.7-16.2, 1 KiB 15.6-15.9. Not yet measured
  // paired on Zen 4 or Zen 5, where one panel streamed better from the two distances.
  static constexpr int64_t kPairedDigitPrefetchBytes = 512;
  // Digit products over i8 weights, i8 × i8 over byte pairs and i4 × i8 follow the
  // host's measured choice for dot kernels (GemmPlan.h: streamPrefetchClass). Where it keeps software
  // prefetch, they prefetch from the same two distances: on the Xeon guest with AMX (1 thread, TinyLlama decode,
  // tok/s) i4 × i8 20.4-20.7 → 23.2-24.0 and i8 12.8-13.2 → 13.6-13.8 against
  // kWeightPrefetchBytes alone (docs/bench.md, "two prefetch distances for i8 weights").
  // Where the choice is off, i8 weights are not prefetched and i4 × i8 keeps
  // kWeightPrefetchBytes: on the Zen 4 guest the two distances lost there (47.8-49.6 →
  // 36.7-38.2 tok/s).
  // bf16 × bf16 and i8 × i8 over vpdpbusd, one product instruction a line, do not
  // prefetch (GemmPlan.h: dotWeightsUnprefetched; bf16 × bf16 at 16 KiB into L2 alone
  // 7.13-7.19 tok/s, against 7.32-7.70 without).
  void prefetchSteps(Value* bPanel, Value* firstStep, int64_t stepBytes) {
    if (spec_.M > kDecodePrefetchRows || dotWeightsUnprefetched(spec_, shape_)) return;
    const bool followsChoice = prefetchChoiceApplies(spec_, shape_);
    if (followsChoice && !shape_.prefetchesStreamedWeights && !i4_) return;
    const bool twoDistances = (digits_ && i4_) || (followsChoice && shape_.prefetchesStreamedWeights);
    auto prefetchAhead = [&](int64_t distance, int locality) { // each panel of the block
      for (int q = 0; q * vectorsPerPanel() < vectors_; ++q) {
        Value* ahead = b_.CreateAdd(b_.CreateMul(firstStep, i64(stepBytes)), i64(q * panelBytes() + distance));
        emitPrefetchLines(b_, byteAt(bPanel, ahead), stepBytes * kUnrollSteps, locality);
      }
    };
    if (digits_ && pairedPanels_) return prefetchAhead(kPairedDigitPrefetchBytes, 3);
    prefetchAhead(twoDistances ? kDigitNearPrefetchBytes : kWeightPrefetchBytes, 3);
    if (twoDistances) prefetchAhead(kDigitFarPrefetchBytes, 2);
  }

  // Dot steps first .. first + count − 1 (count ≤ kUnrollSteps) of i4 weights, step u
  // into accumulator set u % sets; with byte pairs (bytePairProducts), into that set's
  // i16 pair sums instead (widenPairSums).
  void nibbleSteps(Value* first, int64_t count, const std::vector<Value*>& aRow, Value* bPanel,
                   const std::vector<std::vector<llvm::AllocaInst*>>& acc,
                   const std::vector<std::vector<llvm::AllocaInst*>>& pairSums) {
    for (int64_t u = 0; u < count; ++u) {
      const size_t set = size_t(u) % acc.size();
      nibbleStep(b_.CreateAdd(first, i64(u)), aRow, bPanel, pairs_ ? pairSums[set] : acc[set]);
    }
  }

  // Adds a span's i16 pair sums into the i32 accumulators (vpmaddwd), digit 1's × 256
  // into digit 0's (256·T1 + T0 is what the group's end adds, exact in i32:
  // emitGroupedBlock), which saves two registers a vector.
  void widenPairSums(const std::vector<std::vector<llvm::AllocaInst*>>& pairSums,
                     const std::vector<std::vector<llvm::AllocaInst*>>& acc) {
    for (size_t set = 0; set < acc.size(); ++set)
      for (size_t x = 0; x < acc[set].size(); ++x) {
        llvm::AllocaInst* sum = pairSums[set][x];
        const bool digit1 = digits_ && x % kDigits == 1;
        llvm::AllocaInst* slot = acc[set][digit1 ? x - 1 : x];
        Value* widened = call(llvm::Intrinsic::x86_avx2_pmadd_wd, {},
                              {b_.CreateLoad(sum->getAllocatedType(), sum),
                               llvm::ConstantInt::get(sum->getAllocatedType(), digit1 ? 256 : 1)});
        b_.CreateStore(b_.CreateAdd(b_.CreateLoad(accTy_, slot), widened), slot);
      }
  }

  // One dot step s of i4 weights (PackLayout.h): the step's NR·4 nibbles are one vector
  // of bytes, the low nibbles channels 0..W−1 (vector 0), the high ones the rest; each
  // holds q_w + 8, vpdpbusd's unsigned operand, against the rows' signed q_a, into the
  // i32 accumulators `slots`; with byte pairs, vpmaddubsw's pairs into the i16 sums `slots`.
  void nibbleStep(Value* s, const std::vector<Value*>& aRow, Value* bPanel, const std::vector<llvm::AllocaInst*>& slots) {
    std::vector<Value*> w;
    if (!nibbles_) w = splitNibbles(bPanel, s);
    for (int j = 0; nibbles_ && j < vectors_; ++j)
      w.push_back(b_.CreateAlignedLoad(vecI_, unpackedAt(s, j), llvm::Align(W_ * 4)));
    auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), unsigned(4 * W_));
    forEachRowDigit(s, aRow, [&](size_t i, int d, Value* a32) {
      Value* a = b_.CreateVectorSplat(unsigned(W_), a32);
      for (int j = 0; j < vectors_; ++j) {
        llvm::AllocaInst* slot = slots[accumulatorIndex(i, j, d)];
        Value* sum = b_.CreateLoad(slot->getAllocatedType(), slot);
        b_.CreateStore(pairs_ ? b_.CreateAdd(sum, call(llvm::Intrinsic::x86_avx2_pmadd_ub_sw, {},
                                                       {b_.CreateBitCast(w[size_t(j)], bytes), b_.CreateBitCast(a, bytes)}))
                              : call(W_ == 16 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512 : llvm::Intrinsic::x86_avx512_vpdpbusd_256,
                                     {}, {sum, w[size_t(j)], a}),
                       slot);
      }
    });
  }

  // Dot step s's vectors_ vectors of nibbles, one a byte: a panel's step is one vector of
  // bytes (of a pair, two), the low nibbles vector j, the high ones j + 1.
  std::vector<Value*> splitNibbles(Value* bPanel, Value* s) {
    Value* low = i32s(0x0f0f0f0f);
    std::vector<Value*> w;
    for (int j = 0; j < vectors_; j += 2) {
      Value* packed = b_.CreateAlignedLoad(vecI_, weightVectorAt(bPanel, s, shape_.NR * 2, j), llvm::Align(W_ * 4));
      w.push_back(b_.CreateAnd(packed, low));
      if (j + 1 < vectors_)
        w.push_back(wholeBytes_ ? packed : b_.CreateAnd(b_.CreateLShr(packed, i32s(4)), low));
    }
    return w;
  }

  // body(i, d, a32) for each row i of the block and digit d (one digit without digit
  // products): the row's kPack activations of dot step s (32 bits), digit d's row
  // d · rowBytes_ after the first.
  void forEachRowDigit(Value* s, const std::vector<Value*>& aRow, const std::function<void(size_t, int, Value*)>& body) {
    for (size_t i = 0; i < aRow.size(); ++i)
      for (int d = 0; d < digitRows(); ++d) body(i, d, stepWord(aRow[i], s, d * rowBytes_));
  }
  // The 32 bits of dot step s in the converted row at `row`, `offset` bytes on.
  Value* stepWord(Value* row, Value* s, int64_t offset) {
    return b_.CreateAlignedLoad(b_.getInt32Ty(), byteAt(row, b_.CreateAdd(b_.CreateMul(s, i64(4)), i64(offset))), llvm::Align(4));
  }
  int digitRows() const { return digits_ ? kDigits : 1; }
  // Whether a block of `rows` rows multiplies a step's high nibbles as the whole bytes,
  // lo + 16·hi (≤ 255, which vpdpbusd's unsigned operand takes without saturating; byte
  // pairs would saturate): one AND a packed vector and step instead of AND, shift and
  // AND, for the block's rows together; each row's group end then takes the low
  // vector's sums away and shifts, a digit (emitGroupedBlock: groupSum). Kept where
  // that costs less than it saves, and for digit products on the 16-lane row only.
  // Measured (Xeon guest with AMX, 1 thread, 1 × 256 × 2048 from cache, min of 3,000
  // runs, 4-5 rounds): 16 lanes, i4 × i8 5.12-5.39 → 4.46-4.78 µs, digit products
  // 8.81-9.33 → 8.37-8.40; 8 lanes (AVX-VNNI), i4 × i8 6.88-7.07 → 6.01-6.24, but digit
  // products 11.87-12.13 → 11.98-12.29 (there the 256-bit shift and AND run on a port
  // the products do not use); 7 × 5632 × 2048, digit products in blocks of 3 rows on 16
  // lanes, 863-874 → 887-914 µs.
  bool highNibblesAsWholeBytes(int64_t rows) const {
    return i4_ && !pairs_ && (W_ == 16 || !digits_) && rows * 2 * digitRows() < 2 * (spec_.quantGroup / layout_.kPack);
  }
  // A block's accumulator of row i, vector j, digit d (digit products: kDigits a row and vector).
  size_t accumulatorIndex(size_t i, int j, int d) const {
    return (i * size_t(vectors_) + size_t(j)) * size_t(digitRows()) + size_t(d);
  }

  // One dot step s: kPack k steps of every row against the panel's NR channels. A
  // row's kPack activations are one 32-bit broadcast; a channel's kPack weights are
  // one 32-bit lane of the step's vectors (PackLayout.h).
  void dotStep(Value* s, const std::vector<Value*>& aRow, Value* bPanel, const std::vector<llvm::AllocaInst*>& acc) {
    std::vector<Value*> bv(static_cast<size_t>(vectors_));
    for (int j = 0; j < vectors_; ++j)
      bv[size_t(j)] = b_.CreateAlignedLoad(vecI_, weightVectorAt(bPanel, s, shape_.NR * 4, j), llvm::Align(W_ * 4));
    forEachRowDigit(s, aRow, [&](size_t i, int d, Value* a32) {
      Value* abs32 = signedPairs() ? stepWord(aRow[i], s, rowBytes_) : nullptr;
      for (int j = 0; j < vectors_; ++j) {
        llvm::AllocaInst* slot = acc[accumulatorIndex(i, j, d)];
        b_.CreateStore(dot(b_.CreateLoad(accTy_, slot), a32, bv[size_t(j)], abs32), slot);
      }
    });
  }

  // C = actAfterResidual(act(sums + bias) + residual), the sums in f32 first (scaledSums).
  // accumulator(i, j): the sums of row i, vector j of the block.
  void emitEpilogue(Value* row0, int64_t rows, Value* n0, int64_t columns,
                    const std::function<Value*(int64_t i, int j)>& accumulator) {
    if (spec_.gated) return emitGatedEpilogue(row0, rows, n0, accumulator);
    for (int j = 0; j < vectors_; ++j) {
      const int64_t lanes = std::min<int64_t>(W_, columns - int64_t(j) * W_);
      Value* col = b_.CreateAdd(n0, i64(int64_t(j) * W_), "col");
      Value* biasVec = spec_.bias ? loadFirstLanes(b_, vecF_, b_.CreateGEP(b_.getFloatTy(), bias_, col), lanes) : nullptr;
      const ChannelTerms channels = channelTerms(col);
      for (int64_t i = 0; i < rows; ++i) {
        Value* row = b_.CreateAdd(row0, i64(i));
        Value* v = scaledSums(accumulator(i, j), row, channels);
        if (biasVec) v = b_.CreateFAdd(v, biasVec);
        v = math_.activation(spec_.act, v);
        Value* offset = b_.CreateAdd(b_.CreateMul(row, i64(spec_.N)), col);
        if (spec_.residual)
          v = b_.CreateFAdd(v, loadFirstLanes(b_, vecF_, b_.CreateGEP(b_.getFloatTy(), residual_, offset), lanes));
        v = math_.activation(spec_.actAfterResidual, v);
        storeFirstLanes(b_, v, b_.CreateGEP(b_.getFloatTy(), C_, offset), lanes, shape_.maskedStores);
      }
    }
  }

  // What the epilogue needs of the W_ channels from packed column `col` to bring their
  // sums to f32: i8 weights' 128·Σq (i8 activations over vpdpbusd) and scales s_w.
  struct ChannelTerms {
    Value* weightSums = nullptr;
    Value* weightScales = nullptr;
  };
  ChannelTerms channelTerms(Value* col) {
    ChannelTerms t;
    if (!i8_ || i4_) return t; // i4's group scales are in the sums already (emitGroupedBlock)
    if (!digits_ && !pairs_) // digit products take 128·Σq before (i8DigitProducts); byte pairs store q_a signed
      t.weightSums = b_.CreateAlignedLoad(
          vecI_, byteAt(B_, b_.CreateAdd(i64(layout_.sumsOffsetBytes()), b_.CreateMul(col, i64(4)))), llvm::Align(W_ * 4));
    t.weightScales = loadScales(b_, layout_, B_, col, W_);
    return t;
  }
  // Row `row`'s sums v over those channels in f32: i8 × i8 (Σ − 128·Σq) · s_a · s_w
  // (byte pairs: Σ · s_a · s_w), digit products over i8 (f32 sums) · s_a · s_w, i8 × i4
  // (f32 sums, × s_w per group) · s_a, digit products over i4 as they are (every scale
  // applied per group), bf16 as they are.
  Value* scaledSums(Value* v, Value* row, const ChannelTerms& channels) {
    if (!i8_ || (digits_ && i4_)) return v;
    Value* rowScale = b_.CreateVectorSplat(
        unsigned(W_), b_.CreateLoad(b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), rowScales_, b_.CreateSub(row, chunkRow0_))));
    if (i4_) return b_.CreateFMul(v, rowScale);
    if (!digits_) v = b_.CreateSIToFP(channels.weightSums ? b_.CreateSub(v, channels.weightSums) : v, vecF_);
    return b_.CreateFMul(v, b_.CreateFMul(channels.weightScales, rowScale));
  }

  // GemmSpec::gated (whole panels, N a multiple of kGatedColumnMultiple; no residual): a
  // panel's first vector holds gate channels, its second the matching up channels
  // (PanelLayout::gated); C (N/2 columns) gets act(gate + bias) · (up + bias) at the
  // panel's first column halved, for each panel of the block (two when paired:
  // pairsFullPanels).
  void emitGatedEpilogue(Value* row0, int64_t rows, Value* n0, const std::function<Value*(int64_t i, int j)>& accumulator) {
    if (vectors_ % 2 != 0 || vectorsPerPanel() != 2)
      throw std::logic_error("gemm: a gated dot kernel needs whole two-vector panels (" + spec_.key() + ")");
    for (int q = 0; 2 * q < vectors_; ++q) emitGatedPanel(row0, rows, b_.CreateAdd(n0, i64(q * shape_.NR)), 2 * q, accumulator);
  }
  // Of a block's panels, the one whose gate channels are vector j (up: j + 1) from column n.
  void emitGatedPanel(Value* row0, int64_t rows, Value* n, int j, const std::function<Value*(int64_t i, int j)>& accumulator) {
    Value* col = b_.CreateLShr(n, 1, "gatedcol");
    const ChannelTerms gateChannels = channelTerms(n), upChannels = channelTerms(b_.CreateAdd(n, i64(W_)));
    // The bias is [gate; up]: output column c's gate bias at c, its up bias at N/2 + c.
    Value* gateBias = spec_.bias ? loadFirstLanes(b_, vecF_, b_.CreateGEP(b_.getFloatTy(), bias_, col), W_) : nullptr;
    Value* upBias = spec_.bias ? loadFirstLanes(b_, vecF_, b_.CreateGEP(b_.getFloatTy(), bias_, b_.CreateAdd(col, i64(spec_.N / 2))), W_)
                               : nullptr;
    for (int64_t i = 0; i < rows; ++i) {
      Value* row = b_.CreateAdd(row0, i64(i));
      Value* gate = scaledSums(accumulator(i, j), row, gateChannels);
      Value* up = scaledSums(accumulator(i, j + 1), row, upChannels);
      if (gateBias) gate = b_.CreateFAdd(gate, gateBias), up = b_.CreateFAdd(up, upBias);
      Value* v = b_.CreateFMul(math_.activation(spec_.act, gate), up);
      Value* offset = b_.CreateAdd(b_.CreateMul(row, i64(spec_.N / 2)), col);
      storeFirstLanes(b_, v, b_.CreateGEP(b_.getFloatTy(), C_, offset), W_, shape_.maskedStores);
    }
  }

  // Accumulator sets of a digit-product block: two when one set has fewer than
  // kMinFmaChains chains and two fit beside the block's f32 sums, the two unpacked
  // weight vectors, the broadcasts and the nibble mask.
  int digitSets(int64_t rows) const {
    const int64_t chains = rows * vectors_ * kDigits;
    return chains < kMinFmaChains && 2 * chains + rows * vectors_ + 6 <= shape_.registers ? 2 : 1;
  }

  llvm::IRBuilder<> b_;
  VectorMath math_;
  llvm::Function* fn_;
  llvm::FixedVectorType *vecF_, *vecI_, *accTy_;
  Value *A_, *B_, *bias_, *residual_, *C_, *aPack_, *panelBegin_, *panelEnd_, *rowBlockBegin_, *rowBlockEnd_;
  int64_t fullBlocks_ = 0;
  // The parts of the scratch (scratch()), in the caller's aPack buffer.
  Value* aRows_ = nullptr;     // the chunk's converted rows
  Value* rowScales_ = nullptr; // i8: their scales s_a
  Value* groupSums_ = nullptr; // i8 × i4: each row's Σq_a per scale group, [rows][groups_] i32; digits_: Σd, [rows][groups_][kDigits]
  Value* groupScales_ = nullptr;   // digits_: each row's s_g, [rows][groups_] f32
  Value* groupInverses_ = nullptr; // digits_: the row being converted's 1 / s_g, [groups_] f32
  Value* nibbles_ = nullptr;   // unpacksPanels(): the panel's nibbles as bytes, [steps][vectors_]
  Value* tileSums_ = nullptr;  // AMX: a block's C tiles, [32][tilePanelGroup() · NR] f32 / i32
  // The loop nest's current position.
  Value *icBegin_ = nullptr, *icEnd_ = nullptr, *chunkRow0_ = nullptr;
  int vectors_ = 0; // vectors per row of the block being emitted (one panel's, or a pair's)
  bool wholeBytes_ = false; // highNibblesAsWholeBytes of the block being emitted
};

} // namespace

namespace {
bool multipliesBytePairs(const GemmSpec& spec, const CpuFeatures& features, const MicroKernelShape& shape) {
  return spec.activationType != DType::BF16 && bytePairProducts(features, shape);
}
} // namespace

void emitDotGemm(llvm::Function* fn, const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features) {
  if (std::string missing = missingDotInstructions(spec.activationType, features, shape); !missing.empty())
    throw std::invalid_argument("gemm: " + std::string(dtypeName(spec.activationType)) + " activations need " + missing);
  const bool pairs = multipliesBytePairs(spec, features, shape);
  if (pairs && spec.weightType != DType::I4 && spec.activationType != DType::I8)
    throw std::invalid_argument("gemm: byte pairs (vpmaddubsw) take digit products over i4 weights only (got " + spec.key() + ")");
  DotGemmBuilder(fn, spec, shape, features, usesTiles(spec, features, shape), pairs).emit();
}

int64_t dotScratchBytes(const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features) {
  return DotKernelGeometry(spec, shape, features, usesTiles(spec, features, shape),
                           multipliesBytePairs(spec, features, shape))
      .scratch()
      .bytes;
}

} // namespace nnc::codegen
