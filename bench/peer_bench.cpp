// nnc vs peers: machine limits and f32 GEMM, in one process, interleaved.
//
//   peer_bench --machine [--threads T] [--reps N]      -> JSON lines {"kind":"machine",...}
//   peer_bench --gemm    [--threads T] [--reps N] [--min-ms MS] [--settle-ms MS]
//                                                     -> JSON lines {"kind":"gemm",...}
//   peer_bench --mlp --model FILE.nn [--batch B]... [--threads T] [--reps N] [--min-ms MS]
//              [--dump DIR] [--dtype T]               -> JSON lines {"kind":"mlp",...}
//     the model's dense chain through nnc's library (CompiledModel), a chain of oneDNN
//     matmul primitives (bias + eltwise_relu post-op) and OpenBLAS + a bias/ReLU loop,
//     all with nnc's random weights (seed 1, as `nnc --random-weights 1`). --dump writes
//     weights, inputs and nnc's outputs as raw f32 for mlp_bench.py (PyTorch, ORT).
//     (--dtype: nnc stores the model's weights as T; the peers stay f32;
//      --activations bf16|i8: nnc's products take activations of that type, as the CLI's
//      --activations, its weights stored in it unless --dtype says otherwise)
//   peer_bench --dtypes [--threads T] [--reps N] [--min-ms MS]
//                                                     -> JSON lines {"kind":"dtype",...}
//     nnc's GEMM with weights stored in each dtype: batch 1 from DRAM and from cache,
//     with the same-run read probe, and batch 64 (dtypeGemms below).
//   peer_bench --help                                 -> this list, briefly
//
// Every measurement is a timed loop of `iters` calls, with iters chosen so one loop
// takes >= --min-ms; a loop is repeated --reps times and we keep best (min) and median
// time per call. For GEMM the loops are interleaved: for each repetition the order is
// peer A, nnc, peer B, nnc, ... so slow drift of the (shared, noisy) machine hits all
// contenders alike.
//
// Peers: OpenBLAS and BLIS are dlopen'ed (RTLD_LOCAL|RTLD_DEEPBIND, explicit Debian
// paths) because both export cblas/BLAS symbols; oneDNN and LIBXSMM (noblas) are
// linked; Eigen is header-only. None of this is linked into nnc itself.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <functional>
#include <immintrin.h>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include <sys/mman.h>
#include <unordered_map>
#include <vector>

#include <omp.h>

#include "compiler/codegen/AttentionEmitter.h"
#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/codegen/KernelSpec.h"
#include "compiler/driver/Driver.h"
#include "runtime/LargeAllocation.h"
#include "runtime/model/CompiledModel.h"
#include "runtime/model/WeightStore.h"
#include "runtime/ThreadPool.h"
#include "runtime/io/HalfFloat.h"
#include "runtime/jit/Gemm.h"
#include "runtime/jit/JitEngine.h"

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif
#ifdef HAVE_XSMM
#include <libxsmm.h>
#endif
#ifdef HAVE_EIGEN
#include <Eigen/Core>
#endif

using Clock = std::chrono::steady_clock;

static double nowSec() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

struct Opts {
  int threads = 1, reps = 7;
  double minMs = 25, settleMs = -1;
  bool machine = false, gemm = false, mlp = false, dtypes = false, attention = false;
  nnc::DType dtype = nnc::DType::F32; // --mlp --dtype
  nnc::DType activations = nnc::DType::F32; // --mlp --activations
  std::string only; // optional shape filter, e.g. "layer"
  std::string dtypeLabel; // --dtypes --dtype: one row (f32, f16, bf16, i8, i4, f32_inplace)
  std::string model, dump; // --mlp
  std::vector<long> batches;
  std::vector<std::array<long, 3>> shapes; // --gemm --shape MxNxK: these instead of the standard set
};

struct Timing {
  std::vector<double> perCall; // seconds
  double best() const { return *std::min_element(perCall.begin(), perCall.end()); }
  double median() const {
    auto v = perCall;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
};

// calls fn `iters` times, returns seconds per call
static double timeLoop(const std::function<void()>& fn, long iters) {
  double t0 = nowSec();
  for (long i = 0; i < iters; ++i) fn();
  return (nowSec() - t0) / double(iters);
}

// Calls per loop so that one loop takes >= minMs, from the median of single timed calls
// (at least 3, up to 21 or ~200 ms): on a shared machine one preempted call must not
// shrink the loop to a single call.
static long calibrate(const std::function<void()>& fn, double minMs) {
  fn(); // warm-up (first touch, lazy init)
  std::vector<double> ts;
  double t0 = nowSec();
  while (ts.size() < 3 || (ts.size() < 21 && nowSec() - t0 < 0.2)) {
    double t = nowSec();
    fn();
    ts.push_back(nowSec() - t);
  }
  std::sort(ts.begin(), ts.end());
  double med = std::max(ts[ts.size() / 2], 1e-9);
  return std::max(1L, long(std::ceil(minMs * 1e-3 / med)));
}

// ---------------------------------------------------------------- machine limits
// 12 independent chains of vector FMAs on registers only: enough to cover FMA latency
// (4-5 cycles) x 2 ports. V is a GCC vector of 8 (AVX2) or 16 (AVX-512) floats; the
// wrappers below compile it for their ISA (a * x + y contracts to one FMA).
template <class V> __attribute__((always_inline)) inline float fmaChainsOf(long iters) {
  V a0 = V{} + 1.0f, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
    a9 = a0, a10 = a0, a11 = a0;
  const V x = V{} + 0.999999f, y = V{} + 1e-7f;
  for (long i = 0; i < iters; ++i) {
    a0 = a0 * x + y; a1 = a1 * x + y; a2 = a2 * x + y; a3 = a3 * x + y;
    a4 = a4 * x + y; a5 = a5 * x + y; a6 = a6 * x + y; a7 = a7 * x + y;
    a8 = a8 * x + y; a9 = a9 * x + y; a10 = a10 * x + y; a11 = a11 * x + y;
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
    __asm__ volatile("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
  }
  V s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + ((a8 + a9) + (a10 + a11));
  return s[0];
}
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));
__attribute__((target("avx2,fma"), noinline)) static float fmaChainsAvx2(long iters) {
  return fmaChainsOf<Vec8>(iters);
}
__attribute__((target("avx512f,fma"), noinline)) static float fmaChainsAvx512(long iters) {
  return fmaChainsOf<Vec16>(iters);
}
// 12 independent chains of 512-bit vpdpbusd (64 byte products each): the ceiling of
// the i8 dot kernels and of digit products (three per 64 weights and row), which on
// Zen 4 issue as two halves.
__attribute__((target("avx512f,avx512vnni"), noinline)) static float dpbusdChainsAvx512(long iters) {
  __m512i a0 = _mm512_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
          a8 = a0, a9 = a0, a10 = a0, a11 = a0;
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-1);
  for (long i = 0; i < iters; ++i) {
    a0 = _mm512_dpbusd_epi32(a0, x, y); a1 = _mm512_dpbusd_epi32(a1, x, y); a2 = _mm512_dpbusd_epi32(a2, x, y);
    a3 = _mm512_dpbusd_epi32(a3, x, y); a4 = _mm512_dpbusd_epi32(a4, x, y); a5 = _mm512_dpbusd_epi32(a5, x, y);
    a6 = _mm512_dpbusd_epi32(a6, x, y); a7 = _mm512_dpbusd_epi32(a7, x, y); a8 = _mm512_dpbusd_epi32(a8, x, y);
    a9 = _mm512_dpbusd_epi32(a9, x, y); a10 = _mm512_dpbusd_epi32(a10, x, y); a11 = _mm512_dpbusd_epi32(a11, x, y);
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
    __asm__ volatile("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
  }
  __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                               _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
  s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
  return float(_mm512_reduce_add_epi32(s));
}
// The FMA peak of every ISA this host executes: "% of peak" is against the best.
struct FmaProbe { const char* isa; float (*chains)(long); int lanes; };
static std::vector<FmaProbe> fmaProbes() {
  std::vector<FmaProbe> probes{{"avx2+fma", fmaChainsAvx2, 8}};
  if (__builtin_cpu_supports("avx512f")) probes.push_back({"avx512f", fmaChainsAvx512, 16});
  return probes;
}

// Sums n floats (64-byte aligned; n a multiple of 4 vectors) into 4 accumulators of V,
// compiled by the wrappers below for their ISA. From L2 a core can fill more than 32
// bytes a load (Xeon guest with AMX: 1 MiB read at ~145-167 GB/s with AVX2 loads, ~188
// with 512-bit ones), so the read rows are measured with every width the host has.
template <class V> __attribute__((always_inline)) inline float readSumOf(const float* p, size_t n) {
  constexpr size_t lanes = sizeof(V) / sizeof(float);
  V s0{}, s1{}, s2{}, s3{};
  for (size_t i = 0; i + 4 * lanes <= n; i += 4 * lanes) {
    s0 += *reinterpret_cast<const V*>(p + i);
    s1 += *reinterpret_cast<const V*>(p + i + lanes);
    s2 += *reinterpret_cast<const V*>(p + i + 2 * lanes);
    s3 += *reinterpret_cast<const V*>(p + i + 3 * lanes);
  }
  V s = (s0 + s1) + (s2 + s3);
  return s[0];
}
__attribute__((target("avx2"), noinline)) static float readSum(const float* p, size_t n) {
  return readSumOf<Vec8>(p, n);
}
__attribute__((target("avx512f"), noinline)) static float readSumAvx512(const float* p, size_t n) {
  return readSumOf<Vec16>(p, n);
}
// The read loop of every vector width this host executes: the read rows are the best.
struct ReadProbe { const char* isa; float (*sum)(const float*, size_t); };
static std::vector<ReadProbe> readProbes() {
  std::vector<ReadProbe> probes{{"avx2", readSum}};
  if (__builtin_cpu_supports("avx512f")) probes.push_back({"avx512f", readSumAvx512});
  return probes;
}
// The widest of them: the same-run probes next to nnc's streaming (n a multiple of 64).
static float widestReadSum(const float* p, size_t n) {
  static const auto sum = readProbes().back().sum;
  return sum(p, n);
}

static volatile float gSink;

// Runs fn(threadIndex) on T threads at once (caller is thread 0); returns wall seconds.
static double parallelRun(int T, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  double t0 = nowSec();
  for (int t = 1; t < T; ++t) ts.emplace_back(fn, t);
  fn(0);
  for (auto& t : ts) t.join();
  return nowSec() - t0;
}

// Size of cpu0's cache at sysfs index `index` (2: L2, 3: L3 on x86), or `fallback`.
static long cacheBytes(int index, long fallback) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::string s;
  if (f >> s) {
    long v = std::atol(s.c_str());
    if (s.back() == 'K') v *= 1024;
    if (s.back() == 'M') v *= 1024 * 1024;
    if (v > 0) return v;
  }
  return fallback;
}

static void machine(const Opts& o) {
  for (const FmaProbe& probe : fmaProbes())
    for (int T = 1; T <= o.threads; ++T) {
      long iters = 20'000'000;
      Timing tm;
      for (int r = 0; r < o.reps; ++r)
        tm.perCall.push_back(parallelRun(T, [&](int) { gSink = probe.chains(iters); }));
      double flops = 12.0 * probe.lanes * 2 * iters * T;
      std::printf("{\"kind\":\"machine\",\"what\":\"fma_peak\",\"isa\":\"%s\",\"threads\":%d,"
                  "\"best_gflops\":%.2f,\"median_gflops\":%.2f}\n",
                  probe.isa, T, flops / tm.best() / 1e9, flops / tm.median() / 1e9);
      std::fflush(stdout);
    }
  if (__builtin_cpu_supports("avx512vnni"))
    for (int T = 1; T <= o.threads; ++T) {
      long iters = 20'000'000;
      Timing tm;
      for (int r = 0; r < o.reps; ++r)
        tm.perCall.push_back(parallelRun(T, [&](int) { gSink = dpbusdChainsAvx512(iters); }));
      double ops = 12.0 * iters * T;
      // digit_gflops: f32-activation products at three vpdpbusd per 64 weights and row.
      std::printf("{\"kind\":\"machine\",\"what\":\"vpdpbusd_peak\",\"isa\":\"avx512_vnni\",\"threads\":%d,"
                  "\"best_gops\":%.3f,\"median_gops\":%.3f,\"digit_gflops\":%.1f}\n",
                  T, ops / tm.best() / 1e9, ops / tm.median() / 1e9, ops / tm.best() / 1e9 * 64 / 3 * 2);
      std::fflush(stdout);
    }
  struct Buf { const char* what; size_t bytes; long passes; };
  long l2 = cacheBytes(2, 512 * 1024), l3 = cacheBytes(3, 8L << 20);
  // L3: a quarter of it, so that the buffer stays resident next to whatever else
  // (other tenants on a shared machine) lives there.
  Buf bufs[] = {{"read_bw_dram", size_t(512) << 20, 2},
                {"read_bw_l3", size_t(l3 / 4), 0},
                {"read_bw_l2", size_t(l2 / 2), 0}};
  for (auto& b : bufs) {
    size_t n = b.bytes / sizeof(float);
    // Huge-page backed, as nnc's packed weights are (runtime/LargeAllocation.h): the
    // DRAM figure is then the memory's bandwidth, not the 4 KiB TLB's.
    size_t rounded = (n * sizeof(float) + (size_t(2) << 20) - 1) & ~((size_t(2) << 20) - 1);
    float* p = static_cast<float*>(std::aligned_alloc(size_t(2) << 20, rounded));
    madvise(p, rounded, MADV_HUGEPAGE);
    for (size_t i = 0; i < n; ++i) p[i] = float(i & 7);
    long passes = b.passes ? b.passes : std::max(1L, long((256L << 20) / b.bytes));
    for (const ReadProbe& probe : readProbes())
      for (int T = 1; T <= o.threads; ++T) {
        Timing tm;
        size_t chunk = (n / T) & ~size_t(63); // whole iterations of either loop
        for (int r = 0; r < o.reps; ++r) {
          // for the L2 case each thread reads its own copy-sized slice repeatedly;
          // with T threads, each thread gets n/T floats (private L2 on most x86).
          tm.perCall.push_back(parallelRun(T, [&](int t) {
            float s = 0;
            for (long k = 0; k < passes; ++k) {
              __asm__ volatile("" ::: "memory"); // forbid hoisting the (pure) sum out
              s += probe.sum(p + t * chunk, chunk);
            }
            gSink = s;
          }));
        }
        double bytes = double(chunk) * sizeof(float) * T * passes;
        std::printf("{\"kind\":\"machine\",\"what\":\"%s\",\"isa\":\"%s\",\"buffer_bytes\":%zu,"
                    "\"threads\":%d,\"best_gbs\":%.2f,\"median_gbs\":%.2f}\n",
                    b.what, probe.isa, b.bytes, T, bytes / tm.best() / 1e9, bytes / tm.median() / 1e9);
        std::fflush(stdout);
      }
    std::free(p);
  }
}

// ---------------------------------------------------------------- peers
struct Shape { const char* section; long M, N, K; };

// One contender prepared for one shape: run() computes C = A * W^T (W is [N][K]).
struct Runner {
  std::string name;
  std::function<void()> run;
  float* C = nullptr;
};

struct Problem {
  long M, N, K;
  std::vector<float> A, W; // A [M][K], W [N][K]
};

// OpenBLAS / BLIS through dlopen
struct DlBlas {
  void* h = nullptr;
  std::string error;
  explicit DlBlas(const std::vector<const char*>& paths) {
    for (auto* p : paths) {
      h = dlopen(p, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (h) return;
      error += std::string(dlerror()) + "; ";
    }
  }
  void* sym(const char* s) { return h ? dlsym(h, s) : nullptr; }
};

using cblas_sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int,
                               const float*, int, float, float*, int);
using openblas_set_t = void (*)(int);
using bli_sgemm_t = void (*)(int, int, int64_t, int64_t, int64_t, const float*, const float*,
                             int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                             float*, int64_t, int64_t);
using bli_set_t = void (*)(int64_t);

struct Peers {
  int threads;
  std::string openblasErr, blisErr;
  DlBlas openblas{{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                   "libopenblas.so.0"}};
  DlBlas blis{{"/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4",
               "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4", "libblis.so.4"}};
  cblas_sgemm_t obSgemm = nullptr;
  bli_sgemm_t bliSgemm = nullptr;
#ifdef HAVE_DNNL
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
#endif
  explicit Peers(int T) : threads(T) {
    obSgemm = cblas_sgemm_t(openblas.sym("cblas_sgemm"));
    if (auto set = openblas_set_t(openblas.sym("openblas_set_num_threads"))) set(T);
    if (!obSgemm) openblasErr = openblas.error.empty() ? "cblas_sgemm not found" : openblas.error;
    bliSgemm = bli_sgemm_t(blis.sym("bli_sgemm"));
    if (auto set = bli_set_t(blis.sym("bli_thread_set_num_threads"))) set(T);
    if (!bliSgemm) blisErr = blis.error.empty() ? "bli_sgemm not found" : blis.error;
    omp_set_num_threads(T); // oneDNN (Debian: OpenMP) and Eigen
#ifdef HAVE_EIGEN
    Eigen::setNbThreads(T);
#endif
#ifdef HAVE_XSMM
    libxsmm_init();
#endif
  }
};

static float* allocC(long M, long N, std::vector<std::shared_ptr<void>>& keep) {
  float* c = static_cast<float*>(std::aligned_alloc(64, ((M * N * 4 + 63) / 64) * 64));
  std::memset(c, 0, M * N * 4);
  keep.emplace_back(c, std::free);
  return c;
}

// Builds every contender that can run this shape. nnc is first.
static std::vector<Runner> makeRunners(Peers& P, nnc::runtime::JitEngine& jit,
                                       nnc::runtime::ThreadPool* pool, Problem& pr,
                                       std::vector<std::shared_ptr<void>>& keep,
                                       std::vector<std::string>& skipped) {
  const long M = pr.M, N = pr.N, K = pr.K;
  const float* A = pr.A.data();
  const float* W = pr.W.data();
  std::vector<Runner> rs;
  {
    nnc::codegen::GemmSpec spec;
    spec.M = M; spec.N = N; spec.K = K;
    auto g = std::make_shared<nnc::runtime::Gemm>(jit, spec);
    auto packed = std::make_shared<nnc::runtime::PackedWeights>(g->pack(W)); // once, untimed
    keep.push_back(g); keep.push_back(packed);
    float* C = allocC(M, N, keep);
    rs.push_back({"nnc", [=] { g->run(A, *packed, nullptr, nullptr, C, pool); }, C});
  }
  if (P.obSgemm) {
    float* C = allocC(M, N, keep);
    auto f = P.obSgemm;
    rs.push_back({"openblas", [=] {
                    f(101 /*RowMajor*/, 111 /*NoTrans*/, 112 /*Trans*/, int(M), int(N), int(K),
                      1.f, A, int(K), W, int(K), 0.f, C, int(N));
                  }, C});
  } else skipped.push_back("openblas: " + P.openblasErr);
  if (P.bliSgemm) {
    float* C = allocC(M, N, keep);
    auto f = P.bliSgemm;
    rs.push_back({"blis", [=] {
                    static const float one = 1.f, zero = 0.f;
                    // B = W^T as K x N: row stride 1, column stride K. No transpose flag.
                    f(0, 0, M, N, K, &one, A, K, 1, W, 1, K, &zero, C, N, 1);
                  }, C});
  } else skipped.push_back("blis: " + P.blisErr);
#ifdef HAVE_DNNL
  try {
    using namespace dnnl;
    using dt = memory::data_type;
    using tag = memory::format_tag;
    memory::desc aMd({M, K}, dt::f32, tag::ab), wAny({K, N}, dt::f32, tag::any),
        wUser({K, N}, dt::f32, tag::ba), cMd({M, N}, dt::f32, tag::ab);
    auto pd = matmul::primitive_desc(matmul::desc(aMd, wAny, cMd), P.eng);
    auto prim = std::make_shared<matmul>(pd);
    auto wu = memory(wUser, P.eng, const_cast<float*>(W));
    auto wp = std::make_shared<memory>(pd.weights_desc(), P.eng);
    reorder(wu, *wp).execute(P.strm, wu, *wp); // weights reordered once, untimed
    P.strm.wait();
    float* C = allocC(M, N, keep);
    auto am = std::make_shared<memory>(aMd, P.eng, const_cast<float*>(A));
    auto cm = std::make_shared<memory>(cMd, P.eng, C);
    keep.push_back(prim); keep.push_back(wp); keep.push_back(am); keep.push_back(cm);
    dnnl::stream* s = &P.strm;
    rs.push_back({"onednn", [=] {
                    prim->execute(*s, {{DNNL_ARG_SRC, *am}, {DNNL_ARG_WEIGHTS, *wp},
                                       {DNNL_ARG_DST, *cm}});
                    s->wait();
                  }, C});
  } catch (std::exception& e) {
    skipped.push_back(std::string("onednn: ") + e.what());
  }
#else
  skipped.push_back("onednn: not built (headers not found)");
#endif
#ifdef HAVE_XSMM
  if (P.threads == 1 && M <= 64 && N <= 128 && K <= 128) {
    // column-major view: C^T (N x M) = Wt (N x K, from a [K][N] copy) * A^T (K x M)
    auto wt = std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(64, ((K * N * 4 + 63) / 64) * 64)), std::free);
    for (long k = 0; k < K; ++k)
      for (long n = 0; n < N; ++n) wt.get()[k * N + n] = W[n * K + k];
    keep.push_back(wt);
    libxsmm_blasint m = N, n = M, k = K, lda = N, ldb = K, ldc = N;
    float alpha = 1, beta = 0;
    libxsmm_smmfunction fn = libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, nullptr, nullptr);
    if (fn) {
      float* C = allocC(M, N, keep);
      const float* wtp = wt.get();
      rs.push_back({"libxsmm", [=] { fn(wtp, A, C); }, C});
    } else skipped.push_back("libxsmm: dispatch returned NULL");
  }
#endif
#ifdef HAVE_EIGEN
  {
    float* C = allocC(M, N, keep);
    using RM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    rs.push_back({"eigen", [=] {
                    Eigen::Map<const RM> a(A, M, K), w(W, N, K);
                    Eigen::Map<RM> c(C, M, N);
                    c.noalias() = a * w.transpose();
                  }, C});
  }
#endif
  return rs;
}

// Batch 1 (1,4096,4096) with the weights certainly in DRAM: kCopies distinct weight
// tensors (8 × 64 MiB, far over the 32 MiB L3), each call using the next, so no call
// finds its weights in a cache. The rate in weight bytes per second is what the
// "85 % of DRAM read bandwidth" goal is about; the steady loop above (same weights
// every call) lets part of them stay in L3. nnc and OpenBLAS (the peer whose weights
// are plain [N][K] arrays, so copies are cheap), interleaved, best-of-N and median.
static void streamFromDram(const Opts& o, nnc::runtime::JitEngine& jit,
                           nnc::runtime::ThreadPool* pool, Peers& P) {
  constexpr long M = 1, N = 4096, K = 4096;
  constexpr int kCopies = 8;
  std::vector<float> A(K, 0.5f), C(N);
  nnc::codegen::GemmSpec spec;
  spec.M = M; spec.N = N; spec.K = K;
  nnc::runtime::Gemm g(jit, spec);
  std::vector<nnc::runtime::PackedWeights> packed;
  // Plain [N][K] copies on 2 MiB pages, like the packed ones (runtime/LargeAllocation.h)
  const size_t wFloats = size_t(N * K);
  std::vector<std::unique_ptr<float, void (*)(void*)>> W;
  for (int c = 0; c < kCopies; ++c) {
    W.emplace_back(static_cast<float*>(nnc::runtime::allocateLarge(wFloats * 4, 64)), std::free);
    for (size_t i = 0; i < wFloats; ++i) W[c].get()[i] = float((i * 7 + c) % 13) * 0.01f;
    packed.push_back(g.pack(W[c].get()));
  }
  struct Contender { const char* name; std::function<void(int)> call; Timing tm; };
  std::vector<Contender> cs;
  cs.push_back({"nnc", [&](int c) { g.run(A.data(), packed[c], nullptr, nullptr, C.data(), pool); }, {}});
  // The machine-limit probe's read loop over the same copies, on nnc's pool threads: the
  // DRAM bandwidth of this very run (on a shared host it varies from minute to minute).
  const int T = pool ? pool->size() : 1;
  cs.push_back({"read probe", [&](int c) {
                  auto part = [&](int64_t t) {
                    size_t chunk = (wFloats / size_t(T)) & ~size_t(63);
                    gSink = widestReadSum(W[c].get() + size_t(t) * chunk, chunk);
                  };
                  if (pool) pool->parallelFor(T, part);
                  else part(0);
                }, {}});
  if (P.obSgemm)
    cs.push_back({"openblas", [&](int c) {
                    P.obSgemm(101, 111, 112, int(M), int(N), int(K), 1.f, A.data(), int(K),
                              W[c].get(), int(K), 0.f, C.data(), int(N));
                  }, {}});
  constexpr int kRounds = 4; // each timed loop: kRounds passes over the copies
  for (auto& c : cs)
    for (int i = 0; i < kCopies; ++i) c.call(i); // warm-up (first touch)
  for (int r = 0; r < o.reps; ++r)
    for (auto& c : cs) {
      double t0 = nowSec();
      for (int i = 0; i < kRounds * kCopies; ++i) c.call(i % kCopies);
      c.tm.perCall.push_back((nowSec() - t0) / (kRounds * kCopies));
    }
  const double weightBytes = double(N) * K * 4;
  for (auto& c : cs)
    std::printf("{\"kind\":\"stream\",\"M\":%ld,\"N\":%ld,\"K\":%ld,\"threads\":%d,"
                "\"peer\":\"%s\",\"copies\":%d,\"best_us\":%.3f,\"median_us\":%.3f,"
                "\"best_weight_gbs\":%.2f,\"median_weight_gbs\":%.2f}\n",
                M, N, K, o.threads, c.name, kCopies, c.tm.best() * 1e6, c.tm.median() * 1e6,
                weightBytes / c.tm.best() / 1e9, weightBytes / c.tm.median() / 1e9);
  std::fflush(stdout);
}

// Storage dtypes: y = W·x with W 4096×4096 and 11008×4096 stored in each dtype.
//  - batch 1, weights from DRAM: copies of the packed weights (>= 4 × L3 in all), each
//    call the next, interleaved with the read probe over f32 buffers of the same total
//    size on the same threads: weight bytes per second and its share of the probe's;
//  - batch 1 from cache: one copy, every call;
//  - batch 64 (4096×4096): GFLOP/s;
//  - packing time of the f32 weights into each dtype.
// best and median per call over --reps timed loops.
// ---------------------------------------------------------------- storage dtypes: peers
// What else computes y = W·x with W stored below f32 (issue 12, item 5):
//  - plain_loop: a straightforward AVX-512 loop over W row-major [N][K] in the dtype —
//    f16 vcvtph2ps, bf16 a shift, i8 sign-extended and converted (the row's scale after
//    the sum), i4 two weights a byte (k even in the low nibble) with a scale per 32 k —
//    4 rows at a time (4 accumulator chains), rows split over the threads; timed like
//    nnc's batch 1 (from DRAM on rotated copies, and from cache), in the same loop.
//  - onednn: oneDNN matmul where it accepts the combination (onednnLowPrecision below).
struct PlainWeights {
  std::shared_ptr<uint8_t> data;
  size_t bytes = 0;
  std::vector<float> scales; // i8: one per row; i4: one per row and 32 k
};

static bool plainLoopRuns() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("f16c");
}

static PlainWeights plainPack(nnc::DType dt, const float* W, long N, long K) {
  PlainWeights p;
  p.bytes = size_t(N) * size_t(K) * (dt == nnc::DType::I4 ? 1 : nnc::dtypeBits(dt) / 8) / (dt == nnc::DType::I4 ? 2 : 1);
  p.data.reset(static_cast<uint8_t*>(nnc::runtime::allocateLarge((p.bytes + 63) / 64 * 64, 64)), std::free);
  uint8_t* d = p.data.get();
  for (long n = 0; n < N; ++n) {
    const float* w = W + n * K;
    switch (dt) {
    case nnc::DType::F32: std::memcpy(d + n * K * 4, w, size_t(K) * 4); break;
    case nnc::DType::F16:
      for (long k = 0; k < K; ++k) reinterpret_cast<uint16_t*>(d)[n * K + k] = nnc::floatToHalf(w[k]);
      break;
    case nnc::DType::BF16:
      for (long k = 0; k < K; ++k) reinterpret_cast<uint16_t*>(d)[n * K + k] = nnc::floatToBf16(w[k]);
      break;
    case nnc::DType::I8: {
      float m = 0;
      for (long k = 0; k < K; ++k) m = std::max(m, std::fabs(w[k]));
      const float sc = m > 0 ? m / 127 : 1;
      p.scales.push_back(sc);
      for (long k = 0; k < K; ++k) reinterpret_cast<int8_t*>(d)[n * K + k] = int8_t(std::nearbyint(w[k] / sc));
      break;
    }
    default: { // i4, groups of 32 along K
      for (long g = 0; g < K; g += 32) {
        float m = 0;
        for (long k = g; k < g + 32; ++k) m = std::max(m, std::fabs(w[k]));
        const float sc = m > 0 ? m / 7 : 1;
        p.scales.push_back(sc);
        for (long k = g; k < g + 32; k += 2) {
          auto q = [&](long i) { return uint8_t(int(std::nearbyint(w[i] / sc)) & 0xF); };
          d[(n * K + k) / 2] = uint8_t(q(k) | (q(k + 1) << 4));
        }
      }
    }
    }
  }
  return p;
}

// y[n] for rows [n0, n1) (a multiple of 4 apart, K a multiple of 32); xe / xo: x's even
// and odd elements (i4's low and high nibbles).
__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"), noinline)) static void
plainRows(nnc::DType dt, const PlainWeights& w, const float* x, const float* xe, const float* xo, float* y, long K,
          long n0, long n1) {
  const uint8_t* base = w.data.get();
  for (long n = n0; n < n1; n += 4) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int r = 0; r < 4; ++r) {
      const long row = n + r;
      if (dt == nnc::DType::I4) {
        const uint8_t* q = base + row * K / 2;
        const float* sc = w.scales.data() + row * (K / 32);
        for (long k = 0; k < K; k += 32) {
          __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k / 2)));
          const __m512i eight = _mm512_set1_epi32(8), nib = _mm512_set1_epi32(0xF);
          __m512 lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_xor_si512(_mm512_and_si512(v, nib), eight), eight));
          __m512 hi = _mm512_cvtepi32_ps(
              _mm512_sub_epi32(_mm512_xor_si512(_mm512_srli_epi32(v, 4), eight), eight));
          __m512 t = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xo + k / 2), _mm512_mul_ps(lo, _mm512_loadu_ps(xe + k / 2)));
          acc[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(sc[k / 32]), acc[r]);
        }
        continue;
      }
      for (long k = 0; k < K; k += 16) {
        __m512 wv;
        if (dt == nnc::DType::F32) wv = _mm512_loadu_ps(reinterpret_cast<const float*>(base) + row * K + k);
        else if (dt == nnc::DType::F16)
          wv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + (row * K + k) * 2)));
        else if (dt == nnc::DType::BF16)
          wv = _mm512_castsi512_ps(_mm512_slli_epi32(
              _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + (row * K + k) * 2))), 16));
        else
          wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + row * K + k))));
        acc[r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + k), acc[r]);
      }
    }
    for (int r = 0; r < 4; ++r)
      y[n + r] = _mm512_reduce_add_ps(acc[r]) * (dt == nnc::DType::I8 ? w.scales[size_t(n + r)] : 1.0f);
  }
}

// oneDNN 2.6's matmul with low-precision operands, where it accepts them: bf16 × bf16
// and s8 × s8 (per-tensor A scale × per-channel W scale as output scales) into f32, at
// batch 1 and 64, W from cache, src given already converted (nnc's dot kernels convert
// f32 activations inside the call, so this favours oneDNN); weights-only combinations
// (f32 activations × bf16 / f16 / s8 weights) and f16 × f16 are tried and their refusal
// recorded. JSON lines {"kind":"dtype_peer","peer":"onednn",...}.
static void onednnLowPrecision(const Opts& o, const std::vector<float>& W, const std::vector<float>& A, long N, long K) {
#ifdef HAVE_DNNL
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  omp_set_num_threads(o.threads);
  engine eng{engine::kind::cpu, 0};
  stream strm{eng};
  struct Combo { const char* name; dt src, wei; };
  const Combo combos[] = {{"bf16 x bf16", dt::bf16, dt::bf16}, {"s8 x s8", dt::s8, dt::s8},
                          {"f16 x f16", dt::f16, dt::f16},     {"f32 x bf16 (weights only)", dt::f32, dt::bf16},
                          {"f32 x f16 (weights only)", dt::f32, dt::f16}, {"f32 x s8 (weights only)", dt::f32, dt::s8}};
  float wMax = 0, aMax = 0;
  for (float v : W) wMax = std::max(wMax, std::fabs(v));
  for (float v : A) aMax = std::max(aMax, std::fabs(v));
  for (const Combo& c : combos)
    for (long M : {1L, 64L}) {
      auto refuse = [&](const std::string& why) {
        std::printf("{\"kind\":\"dtype_peer\",\"peer\":\"onednn\",\"mode\":\"%s\",\"batch\":%ld,\"N\":%ld,\"K\":%ld,"
                    "\"threads\":%d,\"refused\":\"%s\"}\n", c.name, M, N, K, o.threads, why.c_str());
      };
      try {
        const bool s8 = c.wei == dt::s8;
        const float sa = aMax > 0 ? aMax / 127 : 1, sw = wMax > 0 ? wMax / 127 : 1;
        primitive_attr attr;
        if (s8) attr.set_output_scales(0, {c.src == dt::s8 ? sa * sw : sw});
        memory::desc aMd({M, K}, c.src, tag::ab), wAny({K, N}, c.wei, tag::any), cMd({M, N}, dt::f32, tag::ab);
        auto pd = matmul::primitive_desc(matmul::desc(aMd, wAny, cMd), attr, eng);
        // Operands in their types: the f32 data reordered (scaled for s8) once, untimed.
        auto convert = [&](const float* src, memory::desc userF32, const memory::desc& to, float scale) {
          memory user(userF32, eng, const_cast<float*>(src)), out(to, eng);
          primitive_attr ra;
          if (to.data_type() == dt::s8) ra.set_output_scales(0, {1.0f / scale});
          reorder(reorder::primitive_desc(eng, userF32, eng, to, ra)).execute(strm, user, out);
          strm.wait();
          return out;
        };
        memory wm = convert(W.data(), memory::desc({K, N}, dt::f32, tag::ba), pd.weights_desc(), sw);
        memory am = convert(A.data(), memory::desc({M, K}, dt::f32, tag::ab), aMd, sa);
        std::vector<float> C(size_t(M * N));
        memory cm(cMd, eng, C.data());
        matmul prim(pd);
        auto call = [&] {
          prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, cm}});
          strm.wait();
        };
        const long iters = calibrate(call, o.minMs);
        Timing t;
        for (int r = 0; r < o.reps; ++r) t.perCall.push_back(timeLoop(call, iters));
        std::printf("{\"kind\":\"dtype_peer\",\"peer\":\"onednn\",\"mode\":\"%s\",\"impl\":\"%s\",\"batch\":%ld,"
                    "\"N\":%ld,\"K\":%ld,\"threads\":%d,\"best_us\":%.2f,\"median_us\":%.2f,\"gflops\":%.1f}\n",
                    c.name, pd.impl_info_str(), M, N, K, o.threads, t.best() * 1e6, t.median() * 1e6,
                    2.0 * double(M) * double(N) * double(K) / t.median() / 1e9);
      } catch (const dnnl::error& e) {
        refuse(e.what());
      }
      std::fflush(stdout);
    }
#else
  (void)o, (void)W, (void)A, (void)N, (void)K;
#endif
}

static void dtypeGemms(const Opts& o) {
  auto jit = nnc::runtime::JitEngine::create();
  std::unique_ptr<nnc::runtime::ThreadPool> pool;
  if (o.threads > 1) pool = std::make_unique<nnc::runtime::ThreadPool>(o.threads);
  const int T = o.threads;
  const long l3 = cacheBytes(3, 32L << 20);
  std::printf("{\"kind\":\"info\",\"what\":\"dtypes\",\"cpu\":\"%s\",\"row\":\"%s\",\"threads\":%d,"
              "\"reps\":%d,\"l3_bytes\":%ld}\n",
              jit->cpuName().c_str(), jit->microKernel().family, T, o.reps, l3);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> U(-1, 1);
  const long shapes[2][2] = {{4096, 4096}, {11008, 4096}};
  for (const auto& shape : shapes) {
    const long N = shape[0], K = shape[1];
    std::vector<float> W(size_t(N * K)), A(size_t(64 * K)), C(size_t(64 * N));
    for (auto& v : W) v = U(rng);
    for (auto& v : A) v = U(rng);
    // Each storage dtype, then f32 weights in place (GemmSpec::weightRows: the rows as
    // the file holds them, read through a table of row pointers; label f32_inplace).
    std::vector<std::pair<nnc::DType, bool>> variants;
    for (nnc::DType dt : nnc::kWeightDTypes) variants.emplace_back(dt, false);
    variants.emplace_back(nnc::DType::F32, true);
    for (auto [dt, inPlace] : variants) {
      if (!o.dtypeLabel.empty() && o.dtypeLabel != (inPlace ? "f32_inplace" : std::string(nnc::dtypeName(dt))))
        continue;
      const std::string label = inPlace ? "f32_inplace" : std::string(nnc::dtypeName(dt));
      nnc::codegen::GemmSpec spec;
      spec.M = 1, spec.N = N, spec.K = K, spec.weightType = dt, spec.quantGroup = dt == nnc::DType::I4 ? 32 : 0;
      spec.weightRows = inPlace;
      nnc::runtime::Gemm g(*jit, spec);
      double t0 = nowSec();
      nnc::runtime::PackedWeights first = g.pack(W.data());
      const double packMs = (nowSec() - t0) * 1e3;
      const double bytes = inPlace ? double(N) * double(K) * 4 : double(first.bytes()); // in place: the rows
      const int copies = std::max(2, int(std::ceil(4.0 * double(l3) / bytes)));
      std::vector<nnc::runtime::PackedWeights> packed;
      packed.push_back(std::move(first));
      while (int(packed.size()) < copies) packed.push_back(packed.front().copy());
      // The probe's buffers: as many bytes as all the copies, in as many pieces.
      const size_t probeFloats = (size_t(bytes) / 4 + 63) & ~size_t(63);
      std::vector<std::unique_ptr<float, void (*)(void*)>> probe;
      for (int c = 0; c < copies; ++c) {
        probe.emplace_back(static_cast<float*>(nnc::runtime::allocateLarge(probeFloats * 4, 64)), std::free);
        std::fill_n(probe.back().get(), probeFloats, 0.5f);
      }
      auto gemv = [&](int c) { g.run(A.data(), packed[size_t(c)], nullptr, nullptr, C.data(), pool.get()); };
      // The plain loop over the same storage, as many copies of it.
      const bool plain = plainLoopRuns() && !inPlace;
      std::vector<PlainWeights> plainCopies;
      std::vector<float> xe(static_cast<size_t>(K / 2)), xo(static_cast<size_t>(K / 2)), yPlain(static_cast<size_t>(N));
      for (long k = 0; k < K / 2; ++k) xe[size_t(k)] = A[size_t(2 * k)], xo[size_t(k)] = A[size_t(2 * k + 1)];
      if (plain) {
        plainCopies.push_back(plainPack(dt, W.data(), N, K));
        const int plainN = std::max(2, int(std::ceil(4.0 * double(l3) / double(plainCopies[0].bytes))));
        while (int(plainCopies.size()) < plainN) {
          PlainWeights c = plainCopies[0];
          c.data.reset(static_cast<uint8_t*>(nnc::runtime::allocateLarge((c.bytes + 63) / 64 * 64, 64)), std::free);
          std::memcpy(c.data.get(), plainCopies[0].data.get(), c.bytes);
          plainCopies.push_back(std::move(c));
        }
      }
      auto plainGemv = [&](int c) {
        const PlainWeights& w = plainCopies[size_t(c) % plainCopies.size()];
        auto part = [&](int64_t t) {
          const long rows = (N / 4 + T - 1) / T * 4, n0 = std::min(N, long(t) * rows), n1 = std::min(N, n0 + rows);
          plainRows(dt, w, A.data(), xe.data(), xo.data(), yPlain.data(), K, n0, n1);
        };
        if (pool) pool->parallelFor(T, part);
        else part(0);
      };
      auto read = [&](int c) {
        auto part = [&](int64_t t) {
          size_t chunk = (probeFloats / size_t(T)) & ~size_t(63);
          gSink = widestReadSum(probe[size_t(c)].get() + size_t(t) * chunk, chunk);
        };
        if (pool) pool->parallelFor(T, part);
        else part(0);
      };
      Timing dram, probeT, cache, plainDram, plainCache;
      for (int c = 0; c < copies; ++c) gemv(c), read(c); // first touch
      for (size_t c = 0; c < plainCopies.size(); ++c) plainGemv(int(c));
      const int rounds = std::max(1, int(std::ceil(64.0 * 1024 * 1024 * 4 / (bytes * copies))));
      for (int r = 0; r < o.reps; ++r) {
        for (auto [fn, tm] : {std::pair{std::function<void(int)>(gemv), &dram}, std::pair{std::function<void(int)>(read), &probeT}}) {
          double s = nowSec();
          for (int i = 0; i < rounds * copies; ++i) fn(i % copies);
          tm->perCall.push_back((nowSec() - s) / (rounds * copies));
        }
        const long iters = calibrate([&] { gemv(0); }, o.minMs);
        cache.perCall.push_back(timeLoop([&] { gemv(0); }, iters));
        if (!plain) continue;
        const int plainCalls = rounds * int(plainCopies.size());
        double s = nowSec();
        for (int i = 0; i < plainCalls; ++i) plainGemv(i);
        plainDram.perCall.push_back((nowSec() - s) / plainCalls);
        const long plainIters = calibrate([&] { plainGemv(0); }, o.minMs);
        plainCache.perCall.push_back(timeLoop([&] { plainGemv(0); }, plainIters));
      }
      if (plain) {
        double err = 0, ref = 0; // against nnc's y (both from the same f32 W)
        for (long n = 0; n < N; ++n)
          err = std::max(err, double(std::fabs(yPlain[size_t(n)] - C[size_t(n)]))), ref = std::max(ref, double(std::fabs(C[size_t(n)])));
        std::printf("{\"kind\":\"dtype_peer\",\"peer\":\"plain_loop\",\"dtype\":\"%s\",\"N\":%ld,\"K\":%ld,"
                    "\"threads\":%d,\"weight_bytes\":%zu,\"dram_best_us\":%.2f,\"dram_median_us\":%.2f,"
                    "\"cache_best_us\":%.2f,\"cache_median_us\":%.2f,\"max_rel_diff_vs_nnc\":%.3g}\n",
                    label.c_str(), N, K, T, plainCopies[0].bytes, plainDram.best() * 1e6,
                    plainDram.median() * 1e6, plainCache.best() * 1e6, plainCache.median() * 1e6, err / std::max(ref, 1e-30));
        plainCopies.clear();
      }
      nnc::codegen::GemmSpec batch = spec;
      batch.M = 64;
      auto timeBatch = [&](const nnc::codegen::GemmSpec& b, Timing& t) {
        nnc::runtime::Gemm gb(*jit, b);
        nnc::runtime::PackedWeights pb = gb.pack(W.data());
        auto call = [&] { gb.run(A.data(), pb, nullptr, nullptr, C.data(), pool.get()); };
        call();
        const long iters = calibrate(call, o.minMs);
        for (int r = 0; r < o.reps; ++r) t.perCall.push_back(timeLoop(call, iters));
      };
      // Batch 64 with f32 activations, and with activations of the weights' type where
      // the dot-product kernels exist (bf16: vdpbf16ps, i8: vpdpbusd) and the host has them.
      Timing b64, b64act, b1act;
      if (N == 4096) {
        timeBatch(batch, b64);
        nnc::codegen::GemmSpec act = batch;
        act.activationType = dt;
        if ((dt == nnc::DType::BF16 || dt == nnc::DType::I8) &&
            nnc::codegen::missingDotInstructions(dt, jit->features(),
                                                 jit->microKernel()).empty()) {
          timeBatch(act, b64act);
          act.M = 1;
          timeBatch(act, b1act);
        }
      }
      std::printf("{\"kind\":\"dtype\",\"dtype\":\"%s\",\"N\":%ld,\"K\":%ld,\"threads\":%d,\"weight_bytes\":%.0f,"
                  "\"copies\":%d,\"pack_ms\":%.1f,\"dram_best_us\":%.2f,\"dram_median_us\":%.2f,"
                  "\"dram_weight_gbs\":%.2f,\"probe_gbs\":%.2f,\"share_of_probe\":%.3f,"
                  "\"cache_best_us\":%.2f,\"cache_median_us\":%.2f",
                  label.c_str(), N, K, T, bytes, copies, packMs, dram.best() * 1e6,
                  dram.median() * 1e6, bytes / dram.median() / 1e9, double(probeFloats) * 4 / probeT.median() / 1e9,
                  (bytes / dram.median()) / (double(probeFloats) * 4 / probeT.median()), cache.best() * 1e6,
                  cache.median() * 1e6);
      if (!b64.perCall.empty())
        std::printf(",\"b64_best_us\":%.1f,\"b64_median_us\":%.1f,\"b64_gflops\":%.1f", b64.best() * 1e6,
                    b64.median() * 1e6, 2.0 * 64 * N * K / b64.median() / 1e9);
      if (!b64act.perCall.empty())
        std::printf(",\"b64_act_best_us\":%.1f,\"b64_act_median_us\":%.1f,\"b64_act_gflops\":%.1f,"
                    "\"b1_act_best_us\":%.2f,\"b1_act_median_us\":%.2f,\"products\":\"%s\"",
                    b64act.best() * 1e6, b64act.median() * 1e6, 2.0 * 64 * N * K / b64act.median() / 1e9,
                    b1act.best() * 1e6, b1act.median() * 1e6,
                    nnc::codegen::productInstruction(dt, dt, jit->features(),
                                                     jit->microKernel()).c_str());
      std::printf("}\n");
      std::fflush(stdout);
    }
    if (N == 4096) onednnLowPrecision(o, W, A, N, K);
  }
}

static void gemm(const Opts& o) {
  std::vector<Shape> shapes;
  for (long s : {16, 32, 64, 128, 256, 512, 1024, 2048}) shapes.push_back({"square", s, s, s});
  shapes.push_back({"odd", 23, 23, 23});
  shapes.push_back({"odd", 48, 48, 48});
  shapes.push_back({"odd", 7, 7, 64}); // 7 x 64 x 7: M=7, K=64, N=7
  // layers: M = batch, K = in, N = out
  shapes.push_back({"layer", 1, 256, 784});
  shapes.push_back({"layer", 64, 256, 784});
  shapes.push_back({"layer", 64, 128, 256});
  shapes.push_back({"layer", 64, 10, 128});
  shapes.push_back({"layer", 1, 4096, 4096});
  shapes.push_back({"layer", 32, 3072, 768});
  shapes.push_back({"layer", 256, 3072, 768});
  if (!o.shapes.empty()) shapes.clear();
  for (const auto& [M, N, K] : o.shapes) shapes.push_back({"shape", M, N, K});

  auto jit = nnc::runtime::JitEngine::create();
  std::unique_ptr<nnc::runtime::ThreadPool> pool;
  if (o.threads > 1) pool = std::make_unique<nnc::runtime::ThreadPool>(o.threads);
  Peers P(o.threads);
  double settle = o.settleMs >= 0 ? o.settleMs : (o.threads > 1 ? 120 : 0);
  std::printf("{\"kind\":\"info\",\"cpu\":\"%s\",\"threads\":%d,\"reps\":%d,\"min_ms\":%.0f,"
              "\"settle_ms\":%.0f}\n", jit->cpuName().c_str(), o.threads, o.reps, o.minMs, settle);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> U(-1, 1);
  for (auto& sh : shapes) {
    if (!o.only.empty() && o.only != sh.section) continue;
    Problem pr{sh.M, sh.N, sh.K, {}, {}};
    pr.A.resize(sh.M * sh.K);
    pr.W.resize(sh.N * sh.K);
    for (auto& x : pr.A) x = U(rng);
    for (auto& x : pr.W) x = U(rng);
    std::vector<std::shared_ptr<void>> keep;
    std::vector<std::string> skipped;
    auto rs = makeRunners(P, *jit, pool.get(), pr, keep, skipped);
    // correctness against nnc (and so against each other): max |diff| / max |ref|
    std::vector<long> iters(rs.size());
    for (size_t i = 0; i < rs.size(); ++i) iters[i] = calibrate(rs[i].run, o.minMs);
    std::vector<double> relErr(rs.size(), 0);
    {
      double ref = 0;
      for (long i = 0; i < sh.M * sh.N; ++i) ref = std::max(ref, double(std::fabs(rs[0].C[i])));
      for (size_t r = 1; r < rs.size(); ++r) {
        double d = 0;
        for (long i = 0; i < sh.M * sh.N; ++i) d = std::max(d, double(std::fabs(rs[r].C[i] - rs[0].C[i])));
        relErr[r] = d / std::max(ref, 1e-30);
      }
    }
    std::vector<Timing> tm(rs.size());
    // schedule per repetition: peer1, nnc, peer2, nnc, ...
    std::vector<size_t> order;
    for (size_t i = 1; i < rs.size(); ++i) { order.push_back(i); order.push_back(0); }
    if (rs.size() == 1) order.push_back(0);
    for (int r = 0; r < o.reps; ++r)
      for (size_t i : order) {
        if (settle > 0) std::this_thread::sleep_for(std::chrono::microseconds(long(settle * 1e3)));
        rs[i].run(); // one untimed call after the settle (wakes thread pools)
        tm[i].perCall.push_back(timeLoop(rs[i].run, iters[i]));
      }
    double flop = 2.0 * sh.M * sh.N * sh.K;
    for (size_t i = 0; i < rs.size(); ++i) {
      std::printf("{\"kind\":\"gemm\",\"section\":\"%s\",\"M\":%ld,\"N\":%ld,\"K\":%ld,"
                  "\"threads\":%d,\"peer\":\"%s\",\"best_us\":%.3f,\"median_us\":%.3f,"
                  "\"best_gflops\":%.3f,\"median_gflops\":%.3f,\"samples\":%zu,\"iters\":%ld,"
                  "\"max_rel_err_vs_nnc\":%.3g}\n",
                  sh.section, sh.M, sh.N, sh.K, o.threads, rs[i].name.c_str(), tm[i].best() * 1e6,
                  tm[i].median() * 1e6, flop / tm[i].best() / 1e9, flop / tm[i].median() / 1e9,
                  tm[i].perCall.size(), iters[i], relErr[i]);
    }
    for (auto& s : skipped)
      std::printf("{\"kind\":\"skip\",\"M\":%ld,\"N\":%ld,\"K\":%ld,\"threads\":%d,\"why\":\"%s\"}\n",
                  sh.M, sh.N, sh.K, o.threads, s.c_str());
    std::fflush(stdout);
  }
  if (o.shapes.empty() && (o.only.empty() || o.only == "layer" || o.only == "stream"))
    streamFromDram(o, *jit, pool.get(), P);
}

// ---------------------------------------------------------------- end-to-end MLP
// One dense layer of the model as the peers see it: y = act(x W^T + b), W [N][K].
struct DenseLayer {
  std::string weightName, biasName;
  long K, N;
  bool relu;
  const float* W; // [N][K], from nnc's WeightStore
  const float* b; // [N] or nullptr
};

// Parses, expands, analyses and lowers FILE at `batch` exactly as the nnc CLI does.
static nnc::driver::AnalyzedModel analyzed(const std::string& path, long batch,
                                           nnc::DType dtype = nnc::DType::F32,
                                           nnc::DType activations = nnc::DType::F32) {
  try {
    return nnc::driver::Compiler::fromFile(path, [](const nnc::DiagnosticEngine& d) {
             std::fputs(d.render(false).c_str(), stderr);
           }).analyze([&] {
      nnc::driver::CompileOptions c;
      c.sets["batch"] = batch;
      c.dtype = dtype;
      c.quant.activations = activations;
      return c;
    }());
  } catch (const nnc::UserError& e) {
    throw std::runtime_error(e.what());
  }
}

// The dense chain of a lowered graph; anything else (a non-chain, another epilogue) is
// refused: the peers implement only dense + bias + optional ReLU.
static std::vector<DenseLayer> denseChain(const nnc::ir::Graph& g, const nnc::runtime::WeightStore& ws) {
  using nnc::ir::OpKind;
  std::vector<DenseLayer> ls;
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const auto& op = g.ops[i];
    if (op.kind != OpKind::Dense)
      throw std::runtime_error("op " + op.name + ": the MLP peers support dense layers only");
    if (op.epilogue != OpKind::Identity && op.epilogue != OpKind::Relu)
      throw std::runtime_error("op " + op.name + ": epilogue other than ReLU");
    if (op.residualInput >= 0 || op.inputs.size() != 1 || op.inputs[0] != nnc::ir::ValueId(i - 1))
      throw std::runtime_error("op " + op.name + ": not a plain chain");
    DenseLayer l{};
    for (const auto& p : op.params) {
      if (p.role == nnc::ir::ParamTensor::Role::Weight) l.weightName = p.name;
      if (p.role == nnc::ir::ParamTensor::Role::Bias) l.biasName = p.name;
    }
    const auto& w = ws.get(l.weightName);
    l.N = long(w.shape.at(0));
    l.K = long(w.shape.at(1));
    l.W = w.values().data();
    l.b = l.biasName.empty() ? nullptr : ws.get(l.biasName).values().data();
    l.relu = op.epilogue == OpKind::Relu;
    ls.push_back(l);
  }
  if (ls.empty()) throw std::runtime_error("model has no dense layer");
  return ls;
}

// c[m][n] = max(c[m][n] + b[n], 0) (or without the max): OpenBLAS's epilogue.
__attribute__((target("avx2"), noinline)) static void biasAct(float* c, const float* b, long M, long N,
                                                              bool relu) {
  const __m256 z = _mm256_setzero_ps();
  for (long m = 0; m < M; ++m) {
    float* row = c + m * N;
    long n = 0;
    for (; n + 8 <= N; n += 8) {
      __m256 v = _mm256_loadu_ps(row + n);
      if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + n));
      if (relu) v = _mm256_max_ps(v, z);
      _mm256_storeu_ps(row + n, v);
    }
    for (; n < N; ++n) {
      float v = row[n] + (b ? b[n] : 0.f);
      row[n] = relu ? std::max(v, 0.f) : v;
    }
  }
}

using cblas_sgemv_t = void (*)(int, int, int, int, float, const float*, int, const float*, int, float,
                               float*, int);

static void writeRaw(const std::string& path, const float* p, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(p), std::streamsize(n * sizeof(float)));
  if (!f) throw std::runtime_error(path + ": write failed");
}

static void mlp(const Opts& o) {
  auto jit = nnc::runtime::JitEngine::create();
  Peers P(o.threads);
  auto obGemv = cblas_sgemv_t(P.openblas.sym("cblas_sgemv"));
  double settle = o.settleMs >= 0 ? o.settleMs : (o.threads > 1 ? 120 : 0);
  std::printf("{\"kind\":\"info\",\"what\":\"mlp\",\"cpu\":\"%s\",\"threads\":%d,\"reps\":%d,\"min_ms\":%.0f,"
              "\"settle_ms\":%.0f}\n", jit->cpuName().c_str(), o.threads, o.reps, o.minMs, settle);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> U(-1, 1);
  for (long B : o.batches) {
    std::vector<std::shared_ptr<void>> keep;
    std::vector<std::string> skipped;
    nnc::driver::AnalyzedModel am = analyzed(o.model, B);
    // nnc runs the weights stored as --dtype; the peers (and denseChain) read the f32 ones.
    std::shared_ptr<nnc::runtime::CompiledModel> model =
        nnc::driver::compileModel(o.dtype == nnc::DType::F32 && o.activations == nnc::DType::F32
                                      ? am
                                      : analyzed(o.model, B, o.dtype, o.activations),
                                  *jit, o.threads);
    // Same weights as `nnc --random-weights 1` (the parameter names do not depend on
    // the batch, so every batch gets the same values).
    auto ws = std::make_shared<nnc::runtime::WeightStore>(nnc::runtime::WeightStore::random(am.program.tensors, 1));
    model->setWeights(*ws);
    keep.push_back(model); keep.push_back(ws);
    auto layers = denseChain(am.lowered, *ws);
    const long K0 = layers.front().K, NL = layers.back().N;
    if (model->inputType().elements() != B * K0 || model->outputType().elements() != B * NL)
      throw std::runtime_error("model input/output sizes do not match its dense chain");
    std::vector<float> x(size_t(B * K0));
    for (auto& v : x) v = U(rng);
    const float* X = x.data();

    std::vector<Runner> rs;
    {
      float* C = allocC(B, NL, keep);
      nnc::runtime::CompiledModel* m = model.get();
      rs.push_back({"nnc", [=] { m->run(X, C); }, C});
    }
#ifdef HAVE_DNNL
    try {
      using namespace dnnl;
      using dt = memory::data_type;
      using tag = memory::format_tag;
      struct Exec { std::shared_ptr<matmul> prim; std::unordered_map<int, memory> args; };
      auto execs = std::make_shared<std::vector<Exec>>();
      memory src(memory::desc({B, K0}, dt::f32, tag::ab), P.eng, const_cast<float*>(X));
      float* C = nullptr;
      for (size_t li = 0; li < layers.size(); ++li) {
        const auto& l = layers[li];
        memory::desc sMd({B, l.K}, dt::f32, tag::ab), wAny({l.K, l.N}, dt::f32, tag::any),
            wUser({l.K, l.N}, dt::f32, tag::ba), bMd({1, l.N}, dt::f32, tag::ab), dMd({B, l.N}, dt::f32, tag::ab);
        primitive_attr attr;
        if (l.relu) {
          post_ops po;
          po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
          attr.set_post_ops(po);
        }
        auto pd = l.b ? matmul::primitive_desc(matmul::desc(sMd, wAny, bMd, dMd), attr, P.eng)
                      : matmul::primitive_desc(matmul::desc(sMd, wAny, dMd), attr, P.eng);
        memory wu(wUser, P.eng, const_cast<float*>(l.W));
        memory wp(pd.weights_desc(), P.eng);
        reorder(wu, wp).execute(P.strm, wu, wp); // once, untimed
        P.strm.wait();
        float* dst = allocC(B, l.N, keep);
        memory dm(dMd, P.eng, dst);
        Exec e{std::make_shared<matmul>(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_DST, dm}}};
        if (l.b) e.args[DNNL_ARG_BIAS] = memory(bMd, P.eng, const_cast<float*>(l.b));
        execs->push_back(std::move(e));
        src = dm;
        C = dst;
      }
      keep.push_back(execs);
      dnnl::stream* s = &P.strm;
      rs.push_back({"onednn_chain", [=] {
                      for (auto& e : *execs) e.prim->execute(*s, e.args);
                      s->wait();
                    }, C});
    } catch (std::exception& e) {
      skipped.push_back(std::string("onednn_chain: ") + e.what());
    }
#else
    skipped.push_back("onednn_chain: not built (headers not found)");
#endif
    if (P.obSgemm && obGemv) {
      std::vector<float*> bufs;
      for (auto& l : layers) bufs.push_back(allocC(B, l.N, keep));
      auto gemm = P.obSgemm;
      auto ls = layers;
      rs.push_back({"openblas_loop", [=] {
                      const float* in = X;
                      for (size_t i = 0; i < ls.size(); ++i) {
                        const auto& l = ls[i];
                        if (B == 1) // OpenBLAS 0.3.21's sgemm does not forward M=1 to gemv
                          obGemv(101 /*RowMajor*/, 111 /*NoTrans*/, int(l.N), int(l.K), 1.f, l.W, int(l.K), in, 1,
                                 0.f, bufs[i], 1);
                        else
                          gemm(101, 111, 112 /*Trans*/, int(B), int(l.N), int(l.K), 1.f, in, int(l.K), l.W,
                               int(l.K), 0.f, bufs[i], int(l.N));
                        biasAct(bufs[i], l.b, B, l.N, l.relu);
                        in = bufs[i];
                      }
                    }, bufs.back()});
    } else skipped.push_back("openblas_loop: " + (P.openblasErr.empty() ? std::string("cblas_sgemv not found") : P.openblasErr));

    // calls per loop from the median of 21 timed calls (one preempted call must not
    // shrink the loop to a single call)
    std::vector<long> iters(rs.size());
    for (size_t i = 0; i < rs.size(); ++i) {
      Timing c;
      for (int k = 0; k < 41; ++k) {
        double t0 = nowSec();
        rs[i].run();
        if (k >= 20) c.perCall.push_back(nowSec() - t0);
      }
      iters[i] = std::max(20L, long(std::ceil(o.minMs * 1e-3 / c.median())));
    }
    std::vector<double> relErr(rs.size(), 0);
    double ref = 0;
    for (long i = 0; i < B * NL; ++i) ref = std::max(ref, double(std::fabs(rs[0].C[i])));
    for (size_t r = 1; r < rs.size(); ++r) {
      double d = 0;
      for (long i = 0; i < B * NL; ++i) d = std::max(d, double(std::fabs(rs[r].C[i] - rs[0].C[i])));
      relErr[r] = d / std::max(ref, 1e-30);
    }
    if (!o.dump.empty()) {
      std::string pre = o.dump + "/";
      writeRaw(pre + "input_b" + std::to_string(B) + ".f32", X, size_t(B * K0));
      writeRaw(pre + "nnc_out_b" + std::to_string(B) + ".f32", rs[0].C, size_t(B * NL));
      std::ofstream man(pre + "layers.json");
      man << "{\"input\":" << K0 << ",\"layers\":[";
      for (size_t i = 0; i < layers.size(); ++i) {
        const auto& l = layers[i];
        writeRaw(pre + "w" + std::to_string(i) + ".f32", l.W, size_t(l.N * l.K));
        if (l.b) writeRaw(pre + "b" + std::to_string(i) + ".f32", l.b, size_t(l.N));
        man << (i ? "," : "") << "{\"name\":\"" << l.weightName << "\",\"in\":" << l.K << ",\"out\":" << l.N
            << ",\"bias\":" << (l.b ? "true" : "false") << ",\"relu\":" << (l.relu ? "true" : "false") << "}";
      }
      man << "]}\n";
    }

    std::vector<Timing> tm(rs.size());
    std::vector<size_t> order; // peer A, nnc, peer B, nnc, ...
    for (size_t i = 1; i < rs.size(); ++i) { order.push_back(i); order.push_back(0); }
    if (rs.size() == 1) order.push_back(0);
    // Unlike the GEMM loops, every call is timed: on a shared machine a loop's mean
    // holds the odd ~4 ms preemption, which at 10-300 us per call weighs more than the
    // work; min and median per call are what nnc --bench, PyTorch and ORT report too.
    std::vector<double> loopMean(rs.size(), 1e30);
    for (int r = 0; r < o.reps; ++r)
      for (size_t i : order) {
        if (settle > 0) std::this_thread::sleep_for(std::chrono::microseconds(long(settle * 1e3)));
        rs[i].run();
        double sum = 0;
        for (long k = 0; k < iters[i]; ++k) {
          double t0 = nowSec();
          rs[i].run();
          double t = nowSec() - t0;
          tm[i].perCall.push_back(t);
          sum += t;
        }
        loopMean[i] = std::min(loopMean[i], sum / double(iters[i]));
      }
    double flop = 0;
    for (auto& l : layers) flop += 2.0 * B * l.N * l.K;
    for (size_t i = 0; i < rs.size(); ++i) {
      std::printf("{\"kind\":\"mlp\",\"harness\":\"peer_bench\",\"peer\":\"%s\",\"dtype\":\"%s\",\"activations\":\"%s\",\"batch\":%ld,\"threads\":%d,"
                  "\"best_us\":%.3f,\"median_us\":%.3f,\"best_loop_mean_us\":%.3f,\"best_gflops\":%.3f,"
                  "\"calls\":%zu,\"loops\":%d,\"max_rel_err_vs_nnc\":%.3g",
                  rs[i].name.c_str(), i == 0 ? std::string(nnc::dtypeName(o.dtype)).c_str() : "f32",
                  i == 0 ? std::string(nnc::dtypeName(o.activations)).c_str() : "f32", B, o.threads, tm[i].best() * 1e6, tm[i].median() * 1e6, loopMean[i] * 1e6,
                  flop / tm[i].best() / 1e9, tm[i].perCall.size(), i == 0 ? o.reps * int(rs.size() - 1) : o.reps,
                  relErr[i]);
      if (i == 0) std::printf(",\"compile_ms\":%.1f", model->compileMillis());
      std::printf("}\n");
    }
    for (auto& s : skipped)
      std::printf("{\"kind\":\"skip\",\"what\":\"mlp\",\"batch\":%ld,\"threads\":%d,\"why\":\"%s\"}\n", B, o.threads,
                  s.c_str());
    std::fflush(stdout);
  }
}

// ---------------------------------------------------------------- decode attention
// Normal(0, 1) keys and values in the cache's dtype (i8: q up to ±127 with a scale of
// 1/40 a position), so that the timing sees ordinary numbers, no NaN or subnormals.
static void fillKvCache(const nnc::codegen::KvCacheLayout& l, uint8_t* cache, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t t = 0; t < 2 * l.kvHeads; ++t) {
    uint8_t* plane = cache + t * l.planeBytes();
    for (int64_t j = 0; j < l.context; ++j) {
      const float scale = 1.0f / 40;
      if (l.type == nnc::DType::I8) std::memcpy(plane + 4 * j, &scale, 4);
      uint8_t* v = plane + l.valuesOffset() + j * l.valueBytes();
      for (int64_t c = 0; c < l.headDim; ++c) {
        const float x = normal(rng);
        uint16_t h = 0;
        switch (l.type) {
        case nnc::DType::F16:
          h = nnc::floatToHalf(x), std::memcpy(v + 2 * c, &h, 2);
          break;
        case nnc::DType::BF16:
          h = nnc::floatToBf16(x), std::memcpy(v + 2 * c, &h, 2);
          break;
        case nnc::DType::I8:
          v[c] = uint8_t(int8_t(std::clamp(std::nearbyint(x / scale), -127.0f, 127.0f)));
          break;
        default:
          std::memcpy(v + 4 * c, &x, 4);
        }
      }
    }
  }
}

// nnc's attention of one query over a KV cache (a decode step's, docs/lowering.md
// "Attention of one query"), TinyLlama's shape: 32 query heads over 4 K/V heads of 64,
// a cache as a decoder keeps it (KvCacheLayout: a plane per K or V head, its positions
// in order; --dtype: its dtype), one buffer per layer for 22 layers, batch 1. Per
// context: the 22 calls' time warm (the caches just read) and cold (after reading 4 x L3
// of other memory, as a decode step's weights evict them), best and median of --reps;
// ns per key and query head; the cache's bytes per second. No peer: llama.cpp's
// attention is not callable alone.
static void decodeAttention(const Opts& o) {
  if (o.dtype != nnc::DType::F32 && o.dtype != nnc::DType::F16 && o.dtype != nnc::DType::BF16 &&
      o.dtype != nnc::DType::I8) {
    std::fprintf(stderr, "peer_bench: --attention --dtype takes the KV cache's dtype: f32, f16, bf16 or i8\n");
    std::exit(2);
  }
  auto jit = nnc::runtime::JitEngine::create();
  std::unique_ptr<nnc::runtime::ThreadPool> pool;
  if (o.threads > 1) pool = std::make_unique<nnc::runtime::ThreadPool>(o.threads);
  const long l3 = cacheBytes(3, 32L << 20);
  constexpr int kLayers = 22;
  std::printf("{\"kind\":\"info\",\"what\":\"attention\",\"cpu\":\"%s\",\"row\":\"%s\",\"threads\":%d,"
              "\"reps\":%d,\"layers\":%d}\n",
              jit->cpuName().c_str(), jit->microKernel().family, o.threads, o.reps, kLayers);
  const size_t evictFloats = size_t(4 * l3 / 4);
  std::unique_ptr<float, void (*)(void*)> evict(static_cast<float*>(nnc::runtime::allocateLarge(evictFloats * 4, 64)),
                                                std::free);
  std::fill(evict.get(), evict.get() + evictFloats, 1.0f);
  volatile float sink = 0;
  auto evictCaches = [&] {
    float sum = 0;
    for (size_t i = 0; i < evictFloats; i += 16) sum += evict.get()[i];
    sink = sink + sum;
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (long context : {128L, 512L, 1040L, 2048L}) {
    nnc::codegen::AttentionSpec s;
    s.batch = 1, s.seq = 1, s.heads = 32, s.kvHeads = 4, s.headDim = 64, s.causal = true, s.kvStride = context;
    s.qLd = 2560, s.qCol = 0, s.outLd = 2048, s.scale = 0.125, s.kvCache = true, s.kvType = o.dtype;
    auto f = reinterpret_cast<nnc::codegen::AttentionKernelFn>(jit->kernel(s));
    std::vector<float> q(size_t(s.qLd)), out(size_t(s.outLd)), scratch(size_t(s.units() * s.scratchPerUnit()));
    for (float& x : q) x = normal(rng);
    std::vector<std::unique_ptr<float, void (*)(void*)>> caches;
    const nnc::codegen::KvCacheLayout layout = s.cacheLayout();
    for (int l = 0; l < kLayers; ++l) {
      caches.emplace_back(static_cast<float*>(nnc::runtime::allocateLarge(size_t(layout.entryBytes()), 64)), std::free);
      fillKvCache(layout, reinterpret_cast<uint8_t*>(caches.back().get()), rng);
    }
    const int64_t past = context - 1;
    auto step = [&] {
      for (auto& c : caches) {
        if (!pool) {
          f(q.data(), c.get(), c.get(), scratch.data(), out.data(), 0, s.units(), past);
          continue;
        }
        pool->parallelFor(s.units(), [&](int64_t u) {
          f(q.data(), c.get(), c.get(), scratch.data(), out.data(), u, u + 1, past);
        });
      }
    };
    Timing warm, cold;
    step();
    for (int r = 0; r < o.reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      step();
      warm.perCall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      evictCaches();
      t0 = std::chrono::steady_clock::now();
      step();
      cold.perCall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double keyHeads = double(kLayers) * double(s.heads) * double(context);
    const double bytes = double(kLayers) * double(context) * double(layout.bytesPerPosition());
    std::printf("{\"kind\":\"attention\",\"context\":%ld,\"threads\":%d,\"kv_dtype\":\"%s\",\"kv_bytes\":%.0f,"
                "\"warm_best_us\":%.1f,\"warm_median_us\":%.1f,\"cold_best_us\":%.1f,\"cold_median_us\":%.1f,"
                "\"warm_ns_per_key_head\":%.2f,\"cold_ns_per_key_head\":%.2f,\"cold_kv_gbs\":%.2f}\n",
                context, o.threads, std::string(nnc::dtypeName(o.dtype)).c_str(), bytes, warm.best() * 1e6,
                warm.median() * 1e6, cold.best() * 1e6, cold.median() * 1e6, warm.best() * 1e9 / keyHeads,
                cold.best() * 1e9 / keyHeads, bytes / cold.best() / 1e9);
    std::fflush(stdout);
  }
}

static const char* kUsage =
    "usage: peer_bench MODE... [OPTIONS]  (JSON lines on stdout; see bench/README.md)\n"
    "modes:\n"
    "  --machine                FMA peak per ISA, read bandwidth (DRAM, L3-, L2-sized)\n"
    "  --gemm                   f32 GEMM against the peers (--only square|odd|layer|stream,\n"
    "                           or --shape MxNxK, repeatable: those shapes alone)\n"
    "  --dtypes                 weights stored in f32/f16/bf16/i8/i4, then f32_inplace (--dtype to pick one)\n"
    "  --mlp --model FILE.nn    the model's dense chain end to end (--batch B, repeatable)\n"
    "  --attention              nnc's decode attention over TinyLlama-shaped KV caches, warm and cold\n"
    "                           (--dtype f32|f16|bf16|i8: the caches')\n"
    "options:\n"
    "  --threads T (1)  --reps N (7)  --min-ms MS (25)  --settle-ms MS\n"
    "  --dtype f32|f16|bf16|i8|i4  --activations bf16|i8  --dump DIR (--mlp)\n";

// A whole positive number, or exit 2 naming the option: a typo must not run a
// benchmark with a default in its place.
static long positiveArg(const std::string& option, const std::string& text) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1 || v > (1L << 30)) {
    std::fprintf(stderr, "peer_bench: %s expects a positive whole number, got '%s'\n", option.c_str(), text.c_str());
    std::exit(2);
  }
  return v;
}

static double millisArg(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || v > 1e6) {
    std::fprintf(stderr, "peer_bench: %s expects milliseconds >= 0, got '%s'\n", option.c_str(), text.c_str());
    std::exit(2);
  }
  return v;
}

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "peer_bench: %s needs a value\n%s", a.c_str(), kUsage);
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--help" || a == "-h") { std::fputs(kUsage, stdout); return 0; }
    else if (a == "--machine") o.machine = true;
    else if (a == "--gemm") o.gemm = true;
    else if (a == "--threads") o.threads = int(positiveArg(a, next()));
    else if (a == "--reps") o.reps = int(positiveArg(a, next()));
    else if (a == "--min-ms") o.minMs = millisArg(a, next());
    else if (a == "--settle-ms") o.settleMs = millisArg(a, next());
    else if (a == "--only") {
      o.only = next();
      if (o.only != "square" && o.only != "odd" && o.only != "layer" && o.only != "stream") {
        std::fprintf(stderr, "peer_bench: --only expects square, odd, layer or stream, got '%s'\n", o.only.c_str());
        return 2;
      }
    }
    else if (a == "--shape") {
      const std::string text = next();
      std::array<long, 3> mnk{};
      size_t from = 0;
      for (int d = 0; d < 3; ++d) {
        const size_t x = d < 2 ? text.find('x', from) : text.size();
        if (x == std::string::npos) {
          std::fprintf(stderr, "peer_bench: --shape expects MxNxK (e.g. 392x512x4608), got '%s'\n", text.c_str());
          return 2;
        }
        mnk[size_t(d)] = positiveArg("--shape", text.substr(from, x - from));
        from = x + 1;
      }
      o.shapes.push_back(mnk);
    }
    else if (a == "--mlp") o.mlp = true;
    else if (a == "--dtypes") o.dtypes = true;
    else if (a == "--attention") o.attention = true;
    else if (a == "--dtype") {
      o.dtypeLabel = next();
      auto t = nnc::parseDType(o.dtypeLabel);
      if (o.dtypeLabel == "f32_inplace") t = nnc::DType::F32; // --dtypes only
      if (!t || *t == nnc::DType::I32) {
        std::fprintf(stderr, "--dtype expects f32, f16, bf16, i8 or i4 (--dtypes: or f32_inplace)\n");
        return 2;
      }
      o.dtype = *t;
    }
    else if (a == "--activations") {
      auto t = nnc::parseDType(next());
      if (!t || (*t != nnc::DType::BF16 && *t != nnc::DType::I8)) {
        std::fprintf(stderr, "--activations expects bf16 or i8\n");
        return 2;
      }
      o.activations = *t;
      if (o.dtype == nnc::DType::F32) o.dtype = *t; // the weights it multiplies, as the CLI
    }
    else if (a == "--model") o.model = next();
    else if (a == "--dump") o.dump = next();
    else if (a == "--batch") o.batches.push_back(positiveArg(a, next()));
    else { std::fprintf(stderr, "peer_bench: unknown argument %s\n%s", a.c_str(), kUsage); return 2; }
  }
  if (!o.machine && !o.gemm && !o.dtypes && !o.mlp && !o.attention) { std::fprintf(stderr, "%s", kUsage); return 2; }
  if (o.machine) machine(o);
  if (o.gemm) gemm(o);
  if (o.dtypes) dtypeGemms(o);
  if (o.attention) decodeAttention(o);
  if (o.mlp) {
    if (o.model.empty()) { std::fprintf(stderr, "--mlp needs --model FILE.nn\n"); return 2; }
    if (o.batches.empty()) o.batches = {1, 64};
    try {
      mlp(o);
    } catch (std::exception& e) {
      std::fprintf(stderr, "mlp: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
