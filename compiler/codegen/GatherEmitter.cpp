// Row gather: per row, the id is loaded, compared unsigned against vocab (one test for
// both signs), and the table's row copied in vectors; a bad id stores zeros instead.
#include "compiler/codegen/GatherEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <functional>
#include <stdexcept>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/StoredTable.h"

namespace nnc::codegen {

using llvm::Value;

std::string gatherFunctionName(const GatherSpec& spec) { return "nnc_" + spec.key(); }

void validateGatherSpec(const GatherSpec& s) {
  if (s.rows < 0 || s.vocab < 1 || s.cols < 1 || s.seq < 1)
    throw std::invalid_argument("gather " + s.key() + ": need rows >= 0 and vocab, cols, seq >= 1 (rows " +
                                std::to_string(s.rows) + ", seq " + std::to_string(s.seq) + ")");
  if (s.tableType == DType::I4 && s.group < 1) throw std::invalid_argument("gather " + s.key() + ": i4 needs group >= 1");
  if (s.vocab > INT32_MAX) throw std::invalid_argument("gather " + s.key() + ": vocab exceeds the i32 ids' range");
}

std::unique_ptr<llvm::Module> emitGatherModule(llvm::LLVMContext& ctx, const GatherSpec& spec,
                                               const MicroKernelShape& shape) {
  validateGatherSpec(spec);
  auto module = std::make_unique<llvm::Module>(gatherFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, gatherFunctionName(spec),
                                            {"ids", "table", "out"}, {"rowBegin", "rowEnd"});
  auto args = fn->arg_begin();
  Value *ids = args++, *table = args++, *out = args++, *rowBegin = args++, *rowEnd = args++;

  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  const int W = shape.vectorFloats;
  auto* vecTy = llvm::FixedVectorType::get(b.getFloatTy(), W);
  const int64_t cols = spec.cols, whole = cols / W * W;
  auto at = [&](Value* base, Value* offset) { return b.CreateGEP(b.getFloatTy(), base, offset); };
  // Calls chunk(column, lanes) over the row: whole vectors in a loop, then the tail.
  auto forEachVector = [&](const std::function<void(Value*, int64_t)>& chunk) {
    if (whole > 0)
      LoopBuilder(b).forRange(b.getInt64(0), b.getInt64(whole), W, "col", [&](Value* c) { chunk(c, W); });
    if (cols % W) chunk(b.getInt64(whole), cols % W);
  };
  LoopBuilder(b).forRange(rowBegin, rowEnd, 1, "row", [&](Value* r) {
    Value* id = b.CreateLoad(b.getInt32Ty(), b.CreateGEP(b.getInt32Ty(), ids, r), "id");
    Value* id64 = b.CreateZExt(id, b.getInt64Ty());
    Value* inRange = b.CreateICmpULT(id64, b.getInt64(spec.vocab), "inrange");
    Value* outRow = b.CreateGEP(b.getFloatTy(), out, b.CreateMul(r, b.getInt64(cols)), "outrow");
    LoopBuilder(b).ifElse(
        inRange,
        [&] {
          if (spec.tableType != DType::F32) { // widened from its storage dtype (StoredTable.h)
            const PanelLayout layout = rowTableLayout(spec.vocab, cols, spec.tableType, spec.group);
            forEachVector([&](Value* c, int64_t lanes) {
              storeFirstLanes(b, loadStoredRow(b, layout, table, id64, c, lanes, W), at(outRow, c), lanes);
            });
            return;
          }
          Value* src = b.CreateGEP(b.getFloatTy(), table, b.CreateMul(id64, b.getInt64(cols)), "src");
          forEachVector([&](Value* c, int64_t lanes) {
            storeFirstLanes(b, loadFirstLanes(b, vecTy, at(src, c), lanes), at(outRow, c), lanes);
          });
        },
        [&] {
          forEachVector([&](Value* c, int64_t lanes) {
            storeFirstLanes(b, llvm::Constant::getNullValue(vecTy), at(outRow, c), lanes);
          });
        });
  });
  b.CreateRetVoid();
  return module;
}

} // namespace nnc::codegen
