// The GEMM generator: loop nest, register-blocked micro-kernel and epilogue.
// Reading order: emitGemmModule → GemmBuilder::emitPanel → emitBlock → emitKStep /
// emitEpilogue. The only machine facts used are the MicroKernelShape fields.
#include "compiler/codegen/GemmEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <functional>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PackLayout.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

std::string gemmFunctionName(const GemmSpec& spec) { return "nnc_" + spec.key(); }

void validateGemmSpec(const GemmSpec& s) {
  if (s.M < 1 || s.N < 1 || s.K < 1)
    throw std::invalid_argument("gemm: M, N, K must be >= 1 (got " + s.key() + ")");
  if (s.weightType != DType::F32)
    throw std::invalid_argument("gemm: weight dtype " + std::string(dtypeName(s.weightType)) +
                                " is not implemented yet (only f32)");
}

GemmPlan planGemm(const GemmSpec& spec, const MicroKernelShape& shape) {
  return {shape.MR, (spec.M + shape.MR - 1) / shape.MR, (spec.N + shape.NR - 1) / shape.NR,
          shape.NR};
}

int accumulatorSets(int64_t rows, const MicroKernelShape& shape, int vectorsPerRow) {
  if (vectorsPerRow <= 0) vectorsPerRow = shape.NR / shape.vectorFloats;
  const int64_t chainsPerSet = rows * vectorsPerRow;
  constexpr int64_t kMaxAccumulators = 12;
  int sets = 1;
  while (sets < 4 && chainsPerSet * sets < kMinFmaChains &&
         chainsPerSet * sets * 2 <= kMaxAccumulators)
    sets *= 2;
  return sets;
}

namespace {

constexpr int kUnrollK = 4; // a multiple of every accumulatorSets() value

class GemmBuilder {
public:
  GemmBuilder(llvm::Function* fn, const GemmSpec& spec, const MicroKernelShape& shape)
      : spec_(spec), shape_(shape), layout_{spec.N, spec.K, shape.NR},
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        math_(b_, *fn->getParent(), shape.fma), fn_(fn),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)),
        vectorsPerRow_(shape.NR / shape.vectorFloats) {
    auto arg = fn->arg_begin();
    A_ = arg++; B_ = arg++; bias_ = arg++; residual_ = arg++; C_ = arg++;
    panelBegin_ = arg++; panelEnd_ = arg++; rowBlockBegin_ = arg++; rowBlockEnd_ = arg++;
  }

  void emit() {
    LoopBuilder loops(b_);
    // Full row blocks [rowBlockBegin, min(rowBlockEnd, fullBlocks)); the tail block
    // (index fullBlocks) when the range reaches it.
    fullBlocks_ = spec_.M / shape_.MR;
    Value* full = i64(fullBlocks_);
    fullEnd_ = b_.CreateSelect(b_.CreateICmpSLT(rowBlockEnd_, full), rowBlockEnd_, full, "fullend");
    loops.forRange(panelBegin_, panelEnd_, 1, "panel", [&](Value* p) {
      if (layout_.tailColumns() == 0) return emitPanel(p, shape_.NR);
      Value* isTail = b_.CreateICmpEQ(p, i64(layout_.fullPanels()));
      loops.ifElse(isTail, [&] { emitPanel(p, layout_.tailColumns()); },
                   [&] { emitPanel(p, shape_.NR); });
    });
    b_.CreateRetVoid();
  }

private:
  Value* i64(int64_t v) { return b_.getInt64(v); }

  // One panel: all row blocks of MR, then the M tail, for `columns` valid columns.
  void emitPanel(Value* panel, int64_t columns) {
    // A tail panel narrower than NR computes only the vectors that hold its columns.
    vectorsPerRow_ = int((columns + shape_.vectorFloats - 1) / shape_.vectorFloats);
    Value* n0 = b_.CreateMul(panel, i64(shape_.NR), "n0");
    Value* bPanel = b_.CreateGEP(b_.getFloatTy(), B_,
                                 b_.CreateMul(panel, i64(layout_.panelElements())), "bpanel");
    int64_t tailRows = spec_.M % shape_.MR;
    LoopBuilder loops(b_);
    if (fullBlocks_ > 0)
      loops.forRange(rowBlockBegin_, fullEnd_, 1, "rowblock", [&](Value* blk) {
        emitBlock(b_.CreateMul(blk, i64(shape_.MR), "row0"), shape_.MR, n0, bPanel, columns);
      });
    if (tailRows > 0)
      loops.ifElse(b_.CreateICmpSGT(rowBlockEnd_, i64(fullBlocks_)),
                   [&] { emitBlock(i64(fullBlocks_ * shape_.MR), tailRows, n0, bPanel, columns); },
                   [] {});
  }

  // rows×NR register block starting at row0: accumulate over K into `sets`
  // independent accumulator sets, sum them, then the epilogue.
  void emitBlock(Value* row0, int64_t rows, Value* n0, Value* bPanel, int64_t columns) {
    const int sets = accumulatorSets(rows, shape_, vectorsPerRow_);
    const size_t perSet = size_t(rows * vectorsPerRow_);
    std::vector<std::vector<llvm::AllocaInst*>> acc(sets, std::vector<llvm::AllocaInst*>(perSet));
    {
      llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      for (auto& set : acc)
        for (auto& a : set) a = entry.CreateAlloca(vecTy_, nullptr, "acc");
    }
    for (auto& set : acc)
      for (auto* a : set) b_.CreateStore(llvm::Constant::getNullValue(vecTy_), a);
    std::vector<Value*> aRows(rows);
    for (int64_t i = 0; i < rows; ++i)
      aRows[i] = b_.CreateGEP(b_.getFloatTy(), A_,
                              b_.CreateMul(b_.CreateAdd(row0, i64(i)), i64(spec_.K)), "arow");
    int64_t unrolledK = spec_.K / kUnrollK * kUnrollK;
    LoopBuilder loops(b_);
    if (unrolledK > 0)
      loops.forRange(i64(0), i64(unrolledK), kUnrollK, "k", [&](Value* k) {
        for (int u = 0; u < kUnrollK; ++u)
          emitKStep(b_.CreateAdd(k, i64(u)), aRows, bPanel, acc[u % sets]);
      });
    for (int64_t k = unrolledK; k < spec_.K; ++k)
      emitKStep(i64(k), aRows, bPanel, acc[k % sets]);
    // Pairwise sum of the sets into set 0, in a fixed order (same code for any split).
    for (int stride = 1; stride < sets; stride *= 2)
      for (int s = 0; s + stride < sets; s += 2 * stride)
        for (size_t i = 0; i < perSet; ++i)
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(vecTy_, acc[s][i]),
                                       b_.CreateLoad(vecTy_, acc[s + stride][i])),
                         acc[s][i]);
    emitEpilogue(row0, rows, n0, columns, acc[0]);
  }

  // acc[i][j] += A[row i][k] * Bpanel[k][j*W .. j*W+W)
  void emitKStep(Value* k, const std::vector<Value*>& aRows, Value* bPanel,
                 const std::vector<llvm::AllocaInst*>& acc) {
    std::vector<Value*> bVec(vectorsPerRow_);
    Value* bRow = b_.CreateGEP(b_.getFloatTy(), bPanel, b_.CreateMul(k, i64(shape_.NR)));
    for (int j = 0; j < vectorsPerRow_; ++j)
      bVec[j] = loadPackedB(b_.CreateGEP(b_.getFloatTy(), bRow, i64(j * shape_.vectorFloats)));
    for (size_t i = 0; i < aRows.size(); ++i) {
      Value* a = b_.CreateLoad(b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), aRows[i], k));
      Value* aSplat = b_.CreateVectorSplat(shape_.vectorFloats, a);
      for (int j = 0; j < vectorsPerRow_; ++j) {
        llvm::AllocaInst* slot = acc[i * vectorsPerRow_ + j];
        b_.CreateStore(math_.mulAdd(aSplat, bVec[j], b_.CreateLoad(vecTy_, slot)), slot);
      }
    }
  }

  // The one place that reads packed weights: low-precision types widen here later.
  Value* loadPackedB(Value* ptr) {
    return b_.CreateAlignedLoad(vecTy_, ptr, llvm::Align(shape_.vectorFloats * 4));
  }

  void emitEpilogue(Value* row0, int64_t rows, Value* n0, int64_t columns,
                    const std::vector<llvm::AllocaInst*>& acc) {
    const int W = shape_.vectorFloats;
    for (int j = 0; j < vectorsPerRow_; ++j) {
      int64_t lanes = std::min<int64_t>(W, columns - int64_t(j) * W);
      if (lanes <= 0) break;
      Value* col = b_.CreateAdd(n0, i64(int64_t(j) * W), "col");
      Value* biasVec = spec_.bias ? load(b_.CreateGEP(b_.getFloatTy(), bias_, col), lanes)
                                  : nullptr;
      for (int64_t i = 0; i < rows; ++i) {
        Value* v = b_.CreateLoad(vecTy_, acc[i * vectorsPerRow_ + j]);
        if (biasVec) v = b_.CreateFAdd(v, biasVec);
        v = math_.activation(spec_.act, v);
        Value* offset = b_.CreateAdd(
            b_.CreateMul(b_.CreateAdd(row0, i64(i)), i64(spec_.N)), col);
        if (spec_.residual)
          v = b_.CreateFAdd(v, load(b_.CreateGEP(b_.getFloatTy(), residual_, offset), lanes));
        store(v, b_.CreateGEP(b_.getFloatTy(), C_, offset), lanes);
      }
    }
  }

  // Loads/stores of `lanes` floats (a full vector, or a constant-masked partial one).
  Value* load(Value* ptr, int64_t lanes) {
    if (lanes == shape_.vectorFloats) return b_.CreateAlignedLoad(vecTy_, ptr, llvm::Align(4));
    return b_.CreateMaskedLoad(vecTy_, ptr, llvm::Align(4), mask(lanes),
                               llvm::Constant::getNullValue(vecTy_));
  }
  void store(Value* v, Value* ptr, int64_t lanes) {
    if (lanes == shape_.vectorFloats) b_.CreateAlignedStore(v, ptr, llvm::Align(4));
    else b_.CreateMaskedStore(v, ptr, llvm::Align(4), mask(lanes));
  }
  Value* mask(int64_t lanes) {
    std::vector<llvm::Constant*> bits;
    for (int l = 0; l < shape_.vectorFloats; ++l) bits.push_back(b_.getInt1(l < lanes));
    return llvm::ConstantVector::get(bits);
  }

  const GemmSpec& spec_;
  const MicroKernelShape& shape_;
  PanelLayout layout_;
  llvm::IRBuilder<> b_;
  VectorMath math_;
  llvm::Function* fn_;
  llvm::FixedVectorType* vecTy_;
  int vectorsPerRow_; // of the panel being emitted: NR / W, or fewer in a narrow tail panel
  Value *A_, *B_, *bias_, *residual_, *C_, *panelBegin_, *panelEnd_, *rowBlockBegin_, *rowBlockEnd_;
  int64_t fullBlocks_ = 0;
  Value* fullEnd_ = nullptr; // min(rowBlockEnd, fullBlocks)
};

} // namespace

std::unique_ptr<llvm::Module> emitGemmModule(llvm::LLVMContext& ctx, const GemmSpec& spec,
                                             const MicroKernelShape& shape) {
  validateGemmSpec(spec);
  auto module = std::make_unique<llvm::Module>(gemmFunctionName(spec), ctx);
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* fnTy = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                       {ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64}, false);
  auto* fn = llvm::Function::Create(fnTy, llvm::Function::ExternalLinkage,
                                    gemmFunctionName(spec), *module);
  const char* argNames[] = {"A",          "Bpacked",  "bias",          "residual",   "C",
                            "panelBegin", "panelEnd", "rowBlockBegin", "rowBlockEnd"};
  for (auto& arg : fn->args()) arg.setName(argNames[arg.getArgNo()]);
  for (unsigned i : {0u, 1u, 2u}) { // read-only inputs that never overlap C
    fn->addParamAttr(i, llvm::Attribute::NoAlias);
    fn->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  fn->addParamAttr(3, llvm::Attribute::ReadOnly); // residual may be C itself
  fn->addParamAttr(1, llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
  fn->setDoesNotThrow();
  GemmBuilder(fn, spec, shape).emit();
  return module;
}

} // namespace nnc::codegen
