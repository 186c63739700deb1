#include "compiler/codegen/KernelModules.h"

#include <stdexcept>

#include "compiler/codegen/ArgmaxEmitter.h"
#include "compiler/codegen/AttentionEmitter.h"
#include "compiler/codegen/ChannelEmitter.h"
#include "compiler/codegen/DepthwiseEmitter.h"
#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/codegen/ElementwiseEmitter.h"
#include "compiler/codegen/GatherEmitter.h"
#include "compiler/codegen/GemmEmitter.h"
#include "compiler/codegen/KvAppendEmitter.h"
#include "compiler/codegen/LastPositionEmitter.h"
#include "compiler/codegen/LayoutEmitter.h"
#include "compiler/codegen/NormEmitter.h"
#include "compiler/codegen/PoolEmitter.h"
#include "compiler/codegen/RopeEmitter.h"

namespace nnc::codegen {

namespace {
struct Describe {
  const MicroKernelShape& shape;
  CpuFeatures features;
  KernelModule operator()(const GemmSpec& s) const {
    validateGemmSpec(s);
    if (std::string missing = missingDotInstructions(s.activationType, features, shape); !missing.empty())
      throw std::invalid_argument("gemm: " + std::string(dtypeName(s.activationType)) + " activations need " + missing);
    return {gemmFunctionName(s, shape),
            [s, sh = shape, f = features](llvm::LLVMContext& c) { return emitGemmModule(c, s, sh, f); }};
  }
  KernelModule operator()(const ElementwiseSpec& s) const {
    validateElementwiseSpec(s);
    return {elementwiseFunctionName(s),
            [s, sh = shape](llvm::LLVMContext& c) { return emitElementwiseModule(c, s, sh); }};
  }
  KernelModule operator()(const NormSpec& s) const {
    validateNormSpec(s);
    return {normFunctionName(s), [s, sh = shape](llvm::LLVMContext& c) { return emitNormModule(c, s, sh); }};
  }
  KernelModule operator()(const PoolSpec& s) const {
    validatePoolSpec(s);
    return {poolFunctionName(s), [s, sh = shape](llvm::LLVMContext& c) { return emitPoolModule(c, s, sh); }};
  }
  KernelModule operator()(const LayoutSpec& s) const {
    validateLayoutSpec(s);
    return {layoutFunctionName(s), [s, sh = shape](llvm::LLVMContext& c) { return emitLayoutModule(c, s, sh); }};
  }
  KernelModule operator()(const DepthwiseSpec& s) const {
    validateDepthwiseSpec(s);
    return {depthwiseFunctionName(s),
            [s, sh = shape](llvm::LLVMContext& c) { return emitDepthwiseModule(c, s, sh); }};
  }
  KernelModule operator()(const ChannelSpec& s) const {
    validateChannelSpec(s);
    return {channelFunctionName(s), [s, sh = shape](llvm::LLVMContext& c) { return emitChannelModule(c, s, sh); }};
  }
  KernelModule operator()(const GatherSpec& s) const {
    validateGatherSpec(s);
    return {gatherFunctionName(s), [s, sh = shape](llvm::LLVMContext& c) { return emitGatherModule(c, s, sh); }};
  }
  KernelModule operator()(const RopeSpec& s) const {
    validateRopeSpec(s);
    return {ropeFunctionName(s), [s, sh = shape](llvm::LLVMContext& c) { return emitRopeModule(c, s, sh); }};
  }
  KernelModule operator()(const KvAppendSpec& s) const {
    validateKvAppendSpec(s);
    return {kvAppendFunctionName(s),
            [s, sh = shape, f = features](llvm::LLVMContext& c) { return emitKvAppendModule(c, s, sh, f); }};
  }
  KernelModule operator()(const LastPositionSpec& s) const {
    validateLastPositionSpec(s);
    return {lastPositionFunctionName(s),
            [s, sh = shape](llvm::LLVMContext& c) { return emitLastPositionModule(c, s, sh); }};
  }
  KernelModule operator()(const ArgmaxSpec& s) const {
    validateArgmaxSpec(s);
    return {argmaxFunctionName(s), [s, sh = shape](llvm::LLVMContext& c) { return emitArgmaxModule(c, s, sh); }};
  }
  KernelModule operator()(const ConvGemmSpec& s) const {
    throw std::invalid_argument("conv step " + s.key() + ": no code of its own; compile its parts (compiledParts)");
  }
  KernelModule operator()(const AttentionSpec& s) const {
    validateAttentionSpec(s);
    return {attentionFunctionName(s),
            [s, sh = shape, f = features](llvm::LLVMContext& c) { return emitAttentionModule(c, s, sh, f); }};
  }
};
} // namespace

KernelModule kernelModule(const KernelSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features) {
  return std::visit(Describe{shape, features}, spec);
}

} // namespace nnc::codegen
