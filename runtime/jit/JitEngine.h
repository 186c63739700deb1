// The kernel JIT: one ORC LLJIT for the host CPU, a cache of compiled kernels, and
// textual views (LLVM IR, assembly) of any kernel for `--emit llvm|asm`.
//
// Guarantees: the target is the host's CPU name and features as LLVM detects them
// (JITTargetMachineBuilder::detectHost), so the code is correct on any x86-64 and
// uses FMA/AVX2 only when present. Every module goes through the O3 new-pass-manager
// pipeline (in an IRTransformLayer) before codegen. Each distinct kernel key (spec key
// + CPU + features) is compiled once per engine; gemm()/elementwise() are thread-safe
// and return the same address for the same spec. Compiled code lives as long as the
// engine. Errors (bad spec, LLVM failure) throw std::runtime_error/invalid_argument.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace llvm::orc {
class JITTargetMachineBuilder;
}

namespace nnc::runtime {

// A CPU other than the host's, e.g. {"x86-64", ""} for the SSE2 baseline. It must be
// one the host can execute (used by tests to run every CpuTable row on one machine).
struct JitTarget {
  std::string cpu;
  std::string features; // LLVM feature list, "+avx2,+fma"
};

class JitEngine {
public:
  static std::unique_ptr<JitEngine> create(); // the host CPU; throws on failure
  static std::unique_ptr<JitEngine> create(const JitTarget& target);
  ~JitEngine();
  JitEngine(const JitEngine&) = delete;
  JitEngine& operator=(const JitEngine&) = delete;

  std::string cpuName() const;
  std::string cpuFeatures() const; // LLVM's "+avx2,+fma,..." list, enabled ones only
  // The CpuTable row kernels of this engine are built for (fixes the packed layout).
  const codegen::MicroKernelShape& microKernel() const;

  // Compiles (once per key) and returns the kernel's entry point: a
  // codegen::GemmKernelFn / codegen::ElementwiseKernelFn.
  void* gemm(const codegen::GemmSpec& spec);
  void* elementwise(const codegen::ElementwiseSpec& spec);

  // The optimised IR / the assembly of the kernel for `spec`, as it is compiled here.
  std::string emitLLVM(const codegen::GemmSpec& spec);
  std::string emitAsm(const codegen::GemmSpec& spec);
  std::string emitLLVM(const codegen::ElementwiseSpec& spec);
  std::string emitAsm(const codegen::ElementwiseSpec& spec);

  size_t kernelsCompiled() const;
  double compileMillis() const; // total time spent building + compiling kernels

private:
  struct Impl;
  static std::unique_ptr<JitEngine> createFor(llvm::orc::JITTargetMachineBuilder jtmb);
  explicit JitEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace nnc::runtime
