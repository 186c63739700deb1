// objectStackBytes (runtime/jit/StackSizes.h) reads an object's `.stack_sizes`: the sum
// of its functions' frames, which the engine sizes the kernels' threads from; no section
// or a damaged object says nothing.
#include <gtest/gtest.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <string>

#include "runtime/jit/StackSizes.h"

namespace nnc::testing {
namespace {

constexpr uint64_t kFrameA = 100000, kFrameB = 50000;

// An object of two functions, `b` calling `a`, each passing a stack array of its own
// size to an external function (so neither array can be removed).
std::string objectWithFrames(bool stackSizes) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    llvm::consumeError(jtmb.takeError());
    return {};
  }
  jtmb->getOptions().EmitStackSizeSection = stackSizes;
  auto tm = jtmb->createTargetMachine();
  if (!tm) {
    llvm::consumeError(tm.takeError());
    return {};
  }
  llvm::LLVMContext ctx;
  llvm::Module m("frames", ctx);
  m.setDataLayout((*tm)->createDataLayout());
  m.setTargetTriple((*tm)->getTargetTriple().str());
  llvm::IRBuilder<> b(ctx);
  auto *voidFn = llvm::FunctionType::get(b.getVoidTy(), false);
  llvm::FunctionCallee use = m.getOrInsertFunction("use", b.getVoidTy(), b.getPtrTy());
  llvm::Function *callee = nullptr;
  for (auto [name, bytes] : {std::pair{"a", kFrameA}, std::pair{"b", kFrameB}}) {
    auto *f = llvm::Function::Create(voidFn, llvm::Function::ExternalLinkage, name, m);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
    b.CreateCall(use, {b.CreateAlloca(llvm::ArrayType::get(b.getInt8Ty(), bytes))});
    if (callee) b.CreateCall(callee);
    b.CreateRetVoid();
    callee = f;
  }
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager pm;
  if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) return {};
  pm.run(m);
  return std::string(object.str());
}

TEST(StackSizes, SumsTheFramesOfEveryFunctionInTheObject) {
  const std::string object = objectWithFrames(true);
  ASSERT_FALSE(object.empty());
  const std::optional<size_t> bytes = runtime::objectStackBytes(llvm::MemoryBufferRef(object, "frames"));
  ASSERT_TRUE(bytes.has_value());
  EXPECT_GE(*bytes, kFrameA + kFrameB);
  EXPECT_LE(*bytes, kFrameA + kFrameB + 256); // the arrays, aligned, and a return slot each
}

TEST(StackSizes, AnObjectWithoutTheSectionOrNoObjectSaysNothing) {
  const std::string object = objectWithFrames(false);
  ASSERT_FALSE(object.empty());
  EXPECT_FALSE(runtime::objectStackBytes(llvm::MemoryBufferRef(object, "frames")).has_value());
  const std::string junk = "not an object file";
  EXPECT_FALSE(runtime::objectStackBytes(llvm::MemoryBufferRef(junk, "junk")).has_value());
  std::string cut = objectWithFrames(true);
  cut.resize(cut.size() / 2);
  EXPECT_FALSE(runtime::objectStackBytes(llvm::MemoryBufferRef(cut, "cut")).has_value());
}

} // namespace
} // namespace nnc::testing
