// Row-wise elementwise kernels. Each row is walked in vectors of the CPU's width;
// the column tail (cols % W) is one masked vector op, so no scalar loop exists.
#include "compiler/codegen/ElementwiseEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/StoredTable.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

std::string elementwiseFunctionName(const ElementwiseSpec& spec) { return "nnc_" + spec.key(); }

void validateElementwiseSpec(const ElementwiseSpec& s) {
  if (s.rows < 0 || s.cols < 1)
    throw std::invalid_argument("elementwise: need rows >= 0 and cols >= 1 (got " +
                                s.key() + ", rows " + std::to_string(s.rows) + ")");
  if (s.kind == ElementwiseSpec::AddPositions && s.period < 1)
    throw std::invalid_argument("elementwise: AddPositions needs period >= 1 (got " + s.key() + ")");
  if (s.kind == ElementwiseSpec::AddPositions && s.tableType != DType::F32 &&
      (s.tableRows < s.period || (s.tableType == DType::I4 && s.group < 1)))
    throw std::invalid_argument("elementwise: a stored position table needs tableRows >= period (i4: group >= 1), got " +
                                s.key());
}

namespace {

class ElementwiseBuilder {
public:
  ElementwiseBuilder(llvm::Function* fn, const ElementwiseSpec& spec, const MicroKernelShape& shape)
      : spec_(spec), W_(shape.vectorFloats),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        math_(b_, *fn->getParent(), shape.fma),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)) {
    auto arg = fn->arg_begin();
    x_ = arg++; y_ = arg++; out_ = arg++; rowBegin_ = arg++; rowEnd_ = arg++; past_ = arg++;
  }

  void emit() {
    LoopBuilder(b_).forRange(rowBegin_, rowEnd_, 1, "row", [&](Value* r) {
      Value* base = b_.CreateMul(r, b_.getInt64(spec_.cols), "rowbase");
      // y's row: the same, or (AddPositions) the table's row past + r mod period.
      Value* yBase =
          spec_.kind == ElementwiseSpec::AddPositions
              ? b_.CreateMul(b_.CreateAdd(past_, b_.CreateURem(r, b_.getInt64(spec_.period))), b_.getInt64(spec_.cols),
                             "ybase")
              : base;
      if (spec_.kind == ElementwiseSpec::Softmax) emitSoftmaxRow(base);
      else emitMapRow(base, yBase);
    });
    b_.CreateRetVoid();
  }

private:
  // Calls chunk(offset, lanes) for every vector of the row: a loop over whole vectors,
  // then the tail. offset is the element index within the row.
  void forEachVector(const std::function<void(Value*, int64_t)>& chunk) {
    int64_t whole = spec_.cols / W_ * W_;
    if (whole > 0)
      LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(whole), W_, "col",
                               [&](Value* c) { chunk(c, W_); });
    if (spec_.cols % W_) chunk(b_.getInt64(whole), spec_.cols % W_);
  }

  Value* at(Value* ptr, Value* base, Value* offset) {
    return b_.CreateGEP(b_.getFloatTy(), ptr, b_.CreateAdd(base, offset));
  }
  Value* load(Value* ptr, int64_t lanes, float fill = 0.0f) {
    return loadFirstLanes(b_, vecTy_, ptr, lanes, fill);
  }
  void store(Value* v, Value* ptr, int64_t lanes) { storeFirstLanes(b_, v, ptr, lanes); }
  Value* mask(int64_t lanes) {
    std::vector<llvm::Constant*> bits;
    for (int l = 0; l < W_; ++l) bits.push_back(b_.getInt1(l < lanes));
    return llvm::ConstantVector::get(bits);
  }

  // The table's row at yBase (= position · cols), from column c; widened when it is
  // stored below f32 (StoredTable.h).
  Value* position(Value* yBase, Value* c, int64_t lanes) {
    if (spec_.tableType == DType::F32) return load(at(y_, yBase, c), lanes);
    Value* row = b_.CreateUDiv(yBase, b_.getInt64(spec_.cols));
    return loadStoredRow(b_, rowTableLayout(spec_.tableRows, spec_.cols, spec_.tableType, spec_.group), y_, row, c,
                         lanes, W_);
  }

  void emitMapRow(Value* base, Value* yBase) {
    forEachVector([&](Value* c, int64_t lanes) {
      Value* v = load(at(x_, base, c), lanes);
      switch (spec_.kind) {
      case ElementwiseSpec::Add:
      case ElementwiseSpec::AddPositions: v = b_.CreateFAdd(v, position(yBase, c, lanes)); break;
      case ElementwiseSpec::GatedProduct:
        v = b_.CreateFMul(math_.activation(spec_.act, v), load(at(y_, base, c), lanes));
        break;
      default: v = math_.activation(spec_.act, v);
      }
      store(v, at(out_, base, c), lanes);
    });
  }

  // Three passes over the row: max, exp(x - max) into out with its sum, scale by 1/sum.
  void emitSoftmaxRow(Value* base) {
    const float inf = std::numeric_limits<float>::infinity();
    llvm::AllocaInst* maxSlot = entryAlloca();
    b_.CreateStore(llvm::ConstantFP::get(vecTy_, -inf), maxSlot);
    forEachVector([&](Value* c, int64_t lanes) {
      Value* v = load(at(x_, base, c), lanes, -inf);
      Value* m = b_.CreateLoad(vecTy_, maxSlot);
      b_.CreateStore(b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, m, v), maxSlot);
    });
    Value* rowMax = b_.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_fmaximum,
                                            b_.CreateLoad(vecTy_, maxSlot));
    Value* maxVec = b_.CreateVectorSplat(W_, rowMax);

    llvm::AllocaInst* sumSlot = entryAlloca();
    b_.CreateStore(llvm::Constant::getNullValue(vecTy_), sumSlot);
    forEachVector([&](Value* c, int64_t lanes) {
      Value* e = math_.exp(b_.CreateFSub(load(at(x_, base, c), lanes), maxVec));
      if (lanes != W_) e = b_.CreateSelect(mask(lanes), e, llvm::Constant::getNullValue(vecTy_));
      store(e, at(out_, base, c), lanes);
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(vecTy_, sumSlot), e), sumSlot);
    });
    Value* sum = b_.CreateFAddReduce(llvm::ConstantFP::get(b_.getFloatTy(), 0.0),
                                     b_.CreateLoad(vecTy_, sumSlot));
    Value* sumVec = b_.CreateVectorSplat(W_, sum);

    forEachVector([&](Value* c, int64_t lanes) {
      Value* ptr = at(out_, base, c);
      store(b_.CreateFDiv(load(ptr, lanes), sumVec), ptr, lanes);
    });
  }

  llvm::AllocaInst* entryAlloca() {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    return entry.CreateAlloca(vecTy_);
  }

  const ElementwiseSpec& spec_;
  int W_;
  llvm::IRBuilder<> b_;
  VectorMath math_;
  llvm::FixedVectorType* vecTy_;
  Value *x_, *y_, *out_, *rowBegin_, *rowEnd_, *past_;
};

} // namespace

std::unique_ptr<llvm::Module> emitElementwiseModule(llvm::LLVMContext& ctx,
                                                    const ElementwiseSpec& spec,
                                                    const MicroKernelShape& shape) {
  validateElementwiseSpec(spec);
  auto module = std::make_unique<llvm::Module>(elementwiseFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, elementwiseFunctionName(spec),
                                            {"x", "y", "out"}, {"rowBegin", "rowEnd", "past"});
  ElementwiseBuilder(fn, spec, shape).emit();
  return module;
}

} // namespace nnc::codegen
