// Structured control flow on top of IRBuilder: counted loops and if/else, so the
// emitters read like the loop nests they generate.
//
// forRange(begin, end, step, body): for (iv = begin; iv < end; iv += step) body(iv),
// guarded (zero trips when begin >= end), with the induction variable as a phi in a
// rotated loop. When begin/end are constants the guard folds away. `end - begin` must
// be a multiple of `step` when step > 1 (the emitters guarantee it).
// After each call the builder is positioned in the block after the construct.
// `unroll` (optional): 0 lets LLVM's unrollers decide; 1 forbids unrolling
// (llvm.loop.unroll.disable), for loops whose body is already unrolled or whose full
// unrolling would only grow the code (and the compile time); n > 1 asks for ×n.
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Metadata.h>

#include <functional>

namespace nnc::codegen {

class LoopBuilder {
public:
  explicit LoopBuilder(llvm::IRBuilder<>& b) : b_(b) {}

  void forRange(llvm::Value* begin, llvm::Value* end, int64_t step, const char* name,
                const std::function<void(llvm::Value*)>& body, int unroll = 0) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::LLVMContext& ctx = fn->getContext();
    std::string n(name);
    auto* preheader = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx, n + ".body", fn);
    auto* exit = llvm::BasicBlock::Create(ctx, n + ".exit", fn);
    b_.CreateCondBr(b_.CreateICmpSLT(begin, end), header, exit);

    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(begin->getType(), 2, n);
    iv->addIncoming(begin, preheader);
    body(iv);
    llvm::Value* next = b_.CreateAdd(iv, llvm::ConstantInt::get(begin->getType(), step),
                                     n + ".next", /*HasNUW=*/true, /*HasNSW=*/true);
    iv->addIncoming(next, b_.GetInsertBlock()); // the body may have added blocks
    llvm::BranchInst* latch = b_.CreateCondBr(b_.CreateICmpSLT(next, end), header, exit);
    if (unroll > 0) latch->setMetadata(llvm::LLVMContext::MD_loop, unrollHint(ctx, unroll));
    b_.SetInsertPoint(exit);
  }

  // body(chunkBegin, chunkEnd) for the chunks of `per` units of [begin, end) within
  // [0, total) (a task's range of row blocks or panels). When one chunk holds every
  // unit there is no loop and no chunk arithmetic: the task's range is the chunk.
  void forChunks(llvm::Value* begin, llvm::Value* end, int64_t per, int64_t total, const char* name,
                 const std::function<void(llvm::Value*, llvm::Value*)>& body) {
    if (per >= total) return body(begin, end);
    llvm::Type* ty = begin->getType();
    auto c64 = [&](int64_t v) { return llvm::ConstantInt::get(ty, v); };
    llvm::Value* count = b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(end, begin), c64(per - 1)), c64(per));
    forRange(c64(0), count, 1, name, [&](llvm::Value* c) {
      llvm::Value* chunkBegin = b_.CreateAdd(begin, b_.CreateMul(c, c64(per)), "chunkbegin");
      body(chunkBegin, minimum(b_.CreateAdd(chunkBegin, c64(per)), end, "chunkend"));
    });
  }

  // min(a, b) of two signed integers.
  llvm::Value* minimum(llvm::Value* a, llvm::Value* b, const char* name) {
    return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b, name);
  }

  void ifElse(llvm::Value* cond, const std::function<void()>& then,
              const std::function<void()>& otherwise) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::LLVMContext& ctx = fn->getContext();
    auto* thenBlock = llvm::BasicBlock::Create(ctx, "then", fn);
    auto* elseBlock = llvm::BasicBlock::Create(ctx, "else", fn);
    auto* join = llvm::BasicBlock::Create(ctx, "join", fn);
    b_.CreateCondBr(cond, thenBlock, elseBlock);
    b_.SetInsertPoint(thenBlock);
    then();
    b_.CreateBr(join);
    b_.SetInsertPoint(elseBlock);
    otherwise();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }

private:
  static llvm::MDNode* unrollHint(llvm::LLVMContext& ctx, int unroll) {
    llvm::Metadata* hint =
        unroll == 1
            ? llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"))
            : llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.count"),
                                      llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                                          llvm::Type::getInt32Ty(ctx), unroll))});
    llvm::MDNode* loop = llvm::MDNode::getDistinct(ctx, {nullptr, hint});
    loop->replaceOperandWith(0, loop); // a loop ID refers to itself
    return loop;
  }

  llvm::IRBuilder<>& b_;
};

} // namespace nnc::codegen
