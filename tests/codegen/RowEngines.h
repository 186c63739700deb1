// Shared by the norm and pool tests: one JIT engine per CpuTable row this host can
// execute, and buffers that fault on any access past (or before) their floats.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "GemmReference.h"
#include "runtime/jit/JitEngine.h"

namespace nnc::testing {

struct RowEngine {
  const char* family;
  runtime::JitEngine* jit;
};

// What this CPU can execute, from CPUID (not from hostJit(), whose engine may have
// turned AVX-512 off for a narrower row).
inline codegen::CpuFeatures hostCpuFeatures() {
  codegen::CpuFeatures f;
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  return f;
}

// The host's engine (its own row, with its real CPU name and features), then an engine
// for every other row the host can execute: sse2 (the x86-64 baseline) always, avx
// (no FMA), avx2_fma and avx512 when the host has them. Each engine's row is checked
// to be the one it is named after.
inline const std::vector<RowEngine>& executableRows() {
  static const std::vector<RowEngine> rows = [] {
    struct Candidate {
      const char* family;
      runtime::JitTarget target;
      std::vector<const char*> needs; // host features
    };
    static std::vector<std::unique_ptr<runtime::JitEngine>> engines;
    std::vector<RowEngine> out{{hostJit().microKernel().family, &hostJit()}};
    const codegen::CpuFeatures cpu = hostCpuFeatures();
    std::string host = hostJit().cpuFeatures() + ",";
    if (cpu.avx512f) host += "+avx512f,";
    for (const Candidate& c : {Candidate{"sse2", {"x86-64", ""}, {}},
                               Candidate{"avx", {"x86-64", "+avx"}, {"+avx,"}},
                               Candidate{"avx2_fma", {"x86-64", "+avx,+avx2,+fma"}, {"+avx2,", "+fma,"}},
                               Candidate{"avx512", {"x86-64", "+avx,+avx2,+fma,+avx512f"},
                                         {"+avx2,", "+fma,", "+avx512f,"}}}) {
      if (std::string(c.family) == out[0].family) continue;
      bool runs = true;
      for (const char* f : c.needs) runs = runs && host.find(f) != std::string::npos;
      if (!runs) continue;
      engines.push_back(runtime::JitEngine::create(c.target));
      if (std::string(engines.back()->microKernel().family) != c.family)
        throw std::logic_error(std::string("engine for row ") + c.family + " got row " +
                               engines.back()->microKernel().family);
      out.push_back({c.family, engines.back().get()});
    }
    return out;
  }();
  return rows;
}

// An engine for the named row on this host (its CPU, the row forced), or null with
// the reason in `why` when the host cannot execute the row.
inline std::unique_ptr<runtime::JitEngine> rowEngine(const std::string& family, std::string* why,
                                                     bool halfRate = false) {
  const codegen::MicroKernelShape* row = codegen::findMicroKernel(family);
  if (!row || !codegen::canExecute(hostCpuFeatures(), *row)) {
    *why = "this host cannot execute the " + family + " row";
    return nullptr;
  }
  return runtime::JitEngine::create(runtime::JitTarget{hostJit().cpuName(), "", family, halfRate},
                                    runtime::KernelCacheOptions{});
}

// n floats placed flush against an inaccessible page: after them (guardAfter) or
// before them. Reading or writing one float past the end (or before the start) faults.
class GuardedBuffer {
public:
  GuardedBuffer(size_t n, bool guardAfter) : n_(n) {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    size_t dataPages = (n * sizeof(float) + page_ - 1) / page_ + 1;
    bytes_ = (dataPages + 2) * page_;
    void* m = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<char*>(m);
    mprotect(base_, page_, PROT_NONE);
    mprotect(base_ + bytes_ - page_, page_, PROT_NONE);
    data_ = guardAfter ? reinterpret_cast<float*>(base_ + bytes_ - page_) - n
                       : reinterpret_cast<float*>(base_ + page_);
  }
  ~GuardedBuffer() { munmap(base_, bytes_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  float* data() { return data_; }
  size_t size() const { return n_; }
  void assign(const std::vector<float>& v) {
    for (size_t i = 0; i < n_; ++i) data_[i] = v[i];
  }
  std::vector<float> values() const { return std::vector<float>(data_, data_ + n_); }

private:
  size_t n_, page_, bytes_;
  char* base_;
  float* data_;
};

// The host's row as two JitTargets, planned with the weight prefetch
// (MicroKernelShape::prefetchesStreamedWeights) off ([0]) and on ([1]), neither measured.
inline std::array<std::unique_ptr<runtime::JitEngine>, 2> hostRowWithoutAndWithPrefetch() {
  const codegen::MicroKernelShape& host = hostJit().microKernel();
  std::array<std::unique_ptr<runtime::JitEngine>, 2> engines;
  for (bool prefetch : {false, true}) {
    runtime::JitTarget target{hostJit().cpuName(), "", host.family, host.halfRate};
    target.prefetchesStreamedWeights = prefetch;
    engines[prefetch] = runtime::JitEngine::create(target);
  }
  return engines;
}

// The host's row planned without digit products (MicroKernelShape::digitProducts),
// one engine for the process: f32 × i8 / i4 then widen the weights in the f32 kernel.
// Null, with the reason in `why`, when the host's row has no digit products.
inline runtime::JitEngine* hostRowWithoutDigits(std::string* why) {
  const codegen::MicroKernelShape& host = hostJit().microKernel();
  if (!host.digitProducts) {
    *why = std::string("the host's ") + host.family +
           " row has no vpdpbusd (or NNC_DIGIT_PRODUCTS=off): no digit products to test here";
    return nullptr;
  }
  static std::unique_ptr<runtime::JitEngine> engine = [&] {
    runtime::JitTarget target{hostJit().cpuName(), "", host.family, host.halfRate};
    target.digitProducts = false;
    return runtime::JitEngine::create(target);
  }();
  return engine.get();
}

// Whether the kernel's IR asks for a software prefetch.
inline bool emitsPrefetch(runtime::JitEngine& jit, const codegen::KernelSpec& spec) {
  return jit.emit(spec, runtime::JitEngine::EmitForm::LLVM).find("@llvm.prefetch") != std::string::npos;
}

} // namespace nnc::testing
