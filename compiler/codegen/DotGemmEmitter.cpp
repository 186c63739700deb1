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
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PackLayout.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/VectorMath.h"
#include "runtime/io/HalfFloat.h"

namespace nnc::codegen {

using llvm::Value;

int64_t dotKPack(DType activations) {
  return activations == DType::BF16 ? 2 : activations == DType::I8 ? 4 : 1;
}

std::string missingDotInstructions(DType activations, const CpuFeatures& f, const MicroKernelShape& shape) {
  const bool wide = shape.vectorFloats == 16;
  if (activations == DType::BF16)
    return f.avx512bf16 && wide ? "" : "AVX512_BF16 (vdpbf16ps) on the AVX-512 kernel row";
  if (activations == DType::I8)
    return (wide && f.avx512vnni) || (shape.vectorFloats == 8 && f.avxvnni)
               ? ""
               : "AVX512_VNNI (vpdpbusd) on the AVX-512 kernel row, or AVX-VNNI on the AVX2 row";
  return "";
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
    const float inverse = max > 0 ? 127.0f / max : 0.0f, scale = max / 127.0f;
    for (int64_t k = 0; k < K; ++k) {
      const float q = std::nearbyint(row[k] * inverse);
      row[k] = (std::isnan(q) ? 0.0f : std::clamp(q, -127.0f, 127.0f)) * scale;
    }
  }
  return out;
}

namespace {

constexpr int kUnrollSteps = 4; // dot steps per k-loop iteration; a multiple of every set count

class DotGemmBuilder {
public:
  DotGemmBuilder(llvm::Function* fn, const GemmSpec& spec, const MicroKernelShape& shape)
      : spec_(spec), shape_(shape), layout_(gemmPanelLayout(spec, shape)),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)), math_(b_, *fn->getParent(), shape.fma),
        fn_(fn), i8_(spec.activationType == DType::I8), W_(shape.vectorFloats),
        vecF_(llvm::FixedVectorType::get(b_.getFloatTy(), unsigned(W_))),
        vecI_(llvm::FixedVectorType::get(b_.getInt32Ty(), unsigned(W_))), accTy_(i8_ ? vecI_ : vecF_) {
    auto arg = fn->arg_begin();
    A_ = arg++; B_ = arg++; bias_ = arg++; residual_ = arg++; C_ = arg++;
    panelBegin_ = arg++; panelEnd_ = arg++; rowBlockBegin_ = arg++; rowBlockEnd_ = arg++;
    const int64_t unitBytes = i8_ ? 1 : 2;
    rowBytes_ = (layout_.paddedK() * unitBytes + 63) / 64 * 64;
    const int64_t rowBlocks = (spec.M + shape.MR - 1) / shape.MR;
    rowBlocksPerChunk_ = std::clamp<int64_t>(kMaxConvertedBytes / (shape.MR * rowBytes_), 1, rowBlocks);
  }

  void emit() {
    const int64_t MR = shape_.MR, chunkRows = rowBlocksPerChunk_ * MR;
    {
      llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      auto* rows = entry.CreateAlloca(llvm::ArrayType::get(b_.getInt8Ty(), uint64_t(chunkRows * rowBytes_)),
                                      nullptr, "arows");
      rows->setAlignment(llvm::Align(64));
      aRows_ = rows;
      if (i8_) rowScales_ = entry.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), uint64_t(chunkRows)),
                                               nullptr, "ascales");
    }
    LoopBuilder loops(b_);
    const int64_t rowBlocks = (spec_.M + MR - 1) / MR;
    fullBlocks_ = spec_.M / MR;
    loops.forChunks(rowBlockBegin_, rowBlockEnd_, rowBlocksPerChunk_, rowBlocks, "ic", [&](Value* begin, Value* end) {
      icBegin_ = begin, icEnd_ = end;
      chunkRow0_ = b_.CreateMul(begin, i64(MR), "chunkrow0");
      convertRows(chunkRow0_, loops.minimum(b_.CreateMul(end, i64(MR)), i64(spec_.M), "chunkrowend"));
      loops.forRange(panelBegin_, panelEnd_, 1, "panel", [&](Value* p) {
        if (layout_.tailColumns() == 0) return emitPanel(p, shape_.NR);
        if (layout_.fullPanels() == 0) return emitPanel(p, layout_.tailColumns());
        loops.ifElse(b_.CreateICmpEQ(p, i64(layout_.fullPanels())),
                     [&] { emitPanel(p, layout_.tailColumns()); }, [&] { emitPanel(p, shape_.NR); });
      });
    });
    b_.CreateRetVoid();
  }

private:
  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* i32s(int32_t v) { return llvm::ConstantInt::get(vecI_, uint64_t(int64_t(v)), true); }
  Value* floats(float v) { return llvm::ConstantFP::get(vecF_, v); }
  Value* byteAt(Value* base, Value* offset) { return b_.CreateGEP(b_.getInt8Ty(), base, offset); }
  Value* call(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Type*> types, llvm::ArrayRef<Value*> args) {
    return b_.CreateCall(llvm::Intrinsic::getDeclaration(fn_->getParent(), id, types), args);
  }

  // Rows [rowBegin, rowEnd) of A into aRows_ (row r at (r − chunkRow0)·rowBytes_): bf16
  // (K rounded, then zeros up to a whole vector), or i8 q + 128 and the row's scale.
  // A partial last vector is read with a masked load (zeros past K) and stored whole:
  // rowBytes_ holds K rounded up to W elements.
  void convertRows(Value* rowBegin, Value* rowEnd) {
    LoopBuilder loops(b_);
    const int64_t K = spec_.K, fullK = K / W_ * W_, rem = K % W_;
    loops.forRange(rowBegin, rowEnd, 1, "convrow", [&](Value* r) {
      Value* src = b_.CreateGEP(b_.getFloatTy(), A_, b_.CreateMul(r, i64(K)), "src");
      Value* rel = b_.CreateSub(r, chunkRow0_);
      Value* dst = byteAt(aRows_, b_.CreateMul(rel, i64(rowBytes_)));
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
      // i8: max |a| over the row, then q = roundeven(a · 127 / max) + 128.
      llvm::AllocaInst* maxSlot = entryAlloca(vecF_, "rowmax");
      b_.CreateStore(floats(0), maxSlot);
      each([&](Value*, Value* v) {
        Value* m = b_.CreateLoad(vecF_, maxSlot);
        b_.CreateStore(b_.CreateMaxNum(m, call(llvm::Intrinsic::fabs, {vecF_}, {v})), maxSlot);
      });
      Value* max = b_.CreateFPMaxReduce(b_.CreateLoad(vecF_, maxSlot));
      Value* positive = b_.CreateFCmpOGT(max, llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
      Value* inverse = b_.CreateSelect(positive, b_.CreateFDiv(llvm::ConstantFP::get(b_.getFloatTy(), 127.0), max),
                                       llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
      b_.CreateStore(b_.CreateFDiv(max, llvm::ConstantFP::get(b_.getFloatTy(), 127.0)),
                     b_.CreateGEP(b_.getFloatTy(), rowScales_, rel));
      Value* inverseVec = b_.CreateVectorSplat(unsigned(W_), inverse);
      auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), unsigned(W_));
      each([&](Value* k, Value* v) {
        Value* q = call(llvm::Intrinsic::roundeven, {vecF_}, {b_.CreateFMul(v, inverseVec)});
        // A NaN activation quantises to 0 (fptosi of NaN would be poison).
        q = b_.CreateSelect(b_.CreateFCmpUNO(q, q), floats(0), q);
        q = b_.CreateFPToSI(q, vecI_);
        q = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, q, i32s(127)),
                                     i32s(-127));
        q = b_.CreateTrunc(b_.CreateAdd(q, i32s(128)), bytes);
        b_.CreateAlignedStore(q, byteAt(dst, k), llvm::Align(1));
      });
    });
  }

  llvm::AllocaInst* entryAlloca(llvm::Type* ty, const char* name) {
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return entry.CreateAlloca(ty, nullptr, name);
  }

  // The chunk's row blocks × one panel with `columns` valid columns.
  void emitPanel(Value* panel, int64_t columns) {
    LoopBuilder loops(b_);
    vectors_ = int((columns + W_ - 1) / W_);
    Value* n0 = b_.CreateMul(panel, i64(shape_.NR), "n0");
    const int64_t panelBytes = layout_.panelElements() * (i8_ ? 1 : 2);
    Value* bPanel = byteAt(B_, b_.CreateMul(panel, i64(panelBytes)));
    if (fullBlocks_ > 0)
      loops.forRange(icBegin_, loops.minimum(icEnd_, i64(fullBlocks_), "icfullend"), 1, "rowblock", [&](Value* blk) {
        emitBlock(b_.CreateMul(blk, i64(shape_.MR), "row0"), shape_.MR, n0, bPanel, columns);
      });
    if (const int64_t tailRows = spec_.M % shape_.MR; tailRows > 0)
      loops.ifElse(b_.CreateICmpSGT(icEnd_, i64(fullBlocks_)),
                   [&] { emitBlock(i64(fullBlocks_ * shape_.MR), tailRows, n0, bPanel, columns); }, [] {});
  }

  // rows × (vectors_ · W) accumulators over the K / kPack dot steps, in `sets`
  // independent sets (step s feeds set s % sets), summed in a fixed order.
  void emitBlock(Value* row0, int64_t rows, Value* n0, Value* bPanel, int64_t columns) {
    const int sets = accumulatorSets(rows, shape_, vectors_);
    const size_t perSet = size_t(rows * vectors_);
    std::vector<std::vector<llvm::AllocaInst*>> acc(static_cast<size_t>(sets), std::vector<llvm::AllocaInst*>(perSet));
    for (auto& set : acc)
      for (auto*& a : set) {
        a = entryAlloca(accTy_, "acc");
        b_.CreateStore(llvm::Constant::getNullValue(accTy_), a);
      }
    std::vector<Value*> aRow(static_cast<size_t>(rows));
    Value* rel0 = b_.CreateSub(row0, chunkRow0_);
    for (int64_t i = 0; i < rows; ++i)
      aRow[size_t(i)] = byteAt(aRows_, b_.CreateMul(b_.CreateAdd(rel0, i64(i)), i64(rowBytes_)));
    const int64_t steps = layout_.paddedK() / layout_.kPack, unrolled = steps / kUnrollSteps * kUnrollSteps;
    if (unrolled > 0)
      LoopBuilder(b_).forRange(i64(0), i64(unrolled), kUnrollSteps, "k", [&](Value* s) {
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
    emitEpilogue(row0, rows, n0, columns, acc[0]);
  }

  // One dot step s: kPack k steps of every row against the panel's NR channels. A
  // row's kPack activations are one 32-bit broadcast; a channel's kPack weights are
  // one 32-bit lane of the step's vectors (PackLayout.h).
  void dotStep(Value* s, const std::vector<Value*>& aRow, Value* bPanel, const std::vector<llvm::AllocaInst*>& acc) {
    auto* pairs = llvm::FixedVectorType::get(b_.getBFloatTy(), unsigned(2 * W_));
    std::vector<Value*> bv(static_cast<size_t>(vectors_));
    Value* stepBytes = b_.CreateMul(s, i64(shape_.NR * 4));
    for (int j = 0; j < vectors_; ++j) {
      bv[size_t(j)] = b_.CreateAlignedLoad(vecI_, byteAt(bPanel, b_.CreateAdd(stepBytes, i64(j * W_ * 4))),
                                           llvm::Align(W_ * 4));
      if (!i8_) bv[size_t(j)] = b_.CreateBitCast(bv[size_t(j)], pairs);
    }
    for (size_t i = 0; i < aRow.size(); ++i) {
      Value* a = b_.CreateAlignedLoad(b_.getInt32Ty(), byteAt(aRow[i], b_.CreateMul(s, i64(4))), llvm::Align(4));
      a = b_.CreateVectorSplat(unsigned(W_), a);
      if (!i8_) a = b_.CreateBitCast(a, pairs);
      for (int j = 0; j < vectors_; ++j) {
        llvm::AllocaInst* slot = acc[i * size_t(vectors_) + size_t(j)];
        Value* sum = b_.CreateLoad(accTy_, slot);
        if (i8_)
          sum = call(W_ == 16 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512 : llvm::Intrinsic::x86_avx512_vpdpbusd_256, {},
                     {sum, a, bv[size_t(j)]});
        else
          sum = call(llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512, {}, {sum, a, bv[size_t(j)]});
        b_.CreateStore(sum, slot);
      }
    }
  }

  // C = act(sums + bias) + residual; i8 sums are first (Σ − 128·Σq) · s_a · s_w.
  void emitEpilogue(Value* row0, int64_t rows, Value* n0, int64_t columns, const std::vector<llvm::AllocaInst*>& acc) {
    for (int j = 0; j < vectors_; ++j) {
      const int64_t lanes = std::min<int64_t>(W_, columns - int64_t(j) * W_);
      Value* col = b_.CreateAdd(n0, i64(int64_t(j) * W_), "col");
      Value* biasVec = spec_.bias ? loadFirstLanes(b_, vecF_, b_.CreateGEP(b_.getFloatTy(), bias_, col), lanes) : nullptr;
      Value *sums = nullptr, *weightScales = nullptr;
      if (i8_) {
        sums = b_.CreateAlignedLoad(vecI_, byteAt(B_, b_.CreateAdd(i64(layout_.sumsOffsetBytes()), b_.CreateMul(col, i64(4)))),
                                    llvm::Align(W_ * 4));
        weightScales = b_.CreateAlignedLoad(
            vecF_, byteAt(B_, b_.CreateAdd(i64(layout_.scalesOffsetBytes()), b_.CreateMul(col, i64(4)))),
            llvm::Align(W_ * 4));
      }
      for (int64_t i = 0; i < rows; ++i) {
        Value* row = b_.CreateAdd(row0, i64(i));
        Value* v = b_.CreateLoad(accTy_, acc[size_t(i * vectors_ + j)]);
        if (i8_) {
          Value* rowScale = b_.CreateLoad(b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), rowScales_, b_.CreateSub(row, chunkRow0_)));
          v = b_.CreateFMul(b_.CreateSIToFP(b_.CreateSub(v, sums), vecF_),
                            b_.CreateFMul(weightScales, b_.CreateVectorSplat(unsigned(W_), rowScale)));
        }
        if (biasVec) v = b_.CreateFAdd(v, biasVec);
        v = math_.activation(spec_.act, v);
        Value* offset = b_.CreateAdd(b_.CreateMul(row, i64(spec_.N)), col);
        if (spec_.residual)
          v = b_.CreateFAdd(v, loadFirstLanes(b_, vecF_, b_.CreateGEP(b_.getFloatTy(), residual_, offset), lanes));
        storeFirstLanes(b_, v, b_.CreateGEP(b_.getFloatTy(), C_, offset), lanes, shape_.maskedStores);
      }
    }
  }

  const GemmSpec& spec_;
  const MicroKernelShape& shape_;
  PanelLayout layout_;
  llvm::IRBuilder<> b_;
  VectorMath math_;
  llvm::Function* fn_;
  const bool i8_;
  const int W_;
  llvm::FixedVectorType *vecF_, *vecI_, *accTy_;
  Value *A_, *B_, *bias_, *residual_, *C_, *panelBegin_, *panelEnd_, *rowBlockBegin_, *rowBlockEnd_;
  int64_t rowBytes_ = 0, rowBlocksPerChunk_ = 1, fullBlocks_ = 0;
  Value* aRows_ = nullptr;     // the chunk's converted rows (stack)
  Value* rowScales_ = nullptr; // i8: their scales s_a (stack)
  // The loop nest's current position.
  Value *icBegin_ = nullptr, *icEnd_ = nullptr, *chunkRow0_ = nullptr;
  int vectors_ = 0; // vectors per row of the panel being emitted
};

} // namespace

void emitDotGemm(llvm::Function* fn, const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features) {
  if (std::string missing = missingDotInstructions(spec.activationType, features, shape); !missing.empty())
    throw std::invalid_argument("gemm: " + std::string(dtypeName(spec.activationType)) + " activations need " + missing);
  DotGemmBuilder(fn, spec, shape).emit();
}

} // namespace nnc::codegen
