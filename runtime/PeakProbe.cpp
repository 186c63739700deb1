// The FMA throughput probe: one register-only loop per instruction set, chosen at run
// time, timed on N threads at once.
#include "runtime/PeakProbe.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace nnc::runtime {

namespace {

constexpr int kChains = 12;

// Each loop returns a value depending on every chain so nothing is dead code; the
// chains stay near 1.0 (x·a + b with a < 1), far from denormals and overflow.
// Flops per iteration: kChains × lanes × 2.

__attribute__((target("avx512f"))) float loopAvx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + 0.01f * float(c));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  for (int c = 1; c < kChains; ++c) acc[0] = _mm512_add_ps(acc[0], acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx2,fma"))) float loopAvx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + 0.01f * float(c));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  for (int c = 1; c < kChains; ++c) acc[0] = _mm256_add_ps(acc[0], acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  return lanes[0] + lanes[7];
}

// Without FMA a multiply and an add per step: the same flops per step, two µops.
float loopSse(int64_t iterations) {
  __m128 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm_set1_ps(1.0f + 0.01f * float(c));
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-6f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], a), b);
  for (int c = 1; c < kChains; ++c) acc[0] = _mm_add_ps(acc[0], acc[c]);
  return _mm_cvtss_f32(acc[0]);
}

struct Isa {
  const char* name;
  int lanes;
  float (*loop)(int64_t);
};

Isa hostIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", 16, loopAvx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2+fma", 8, loopAvx2};
  return {"sse", 4, loopSse};
}

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::atomic<float> sink{0}; // keeps the loops' results alive

// `threads` threads (the caller and threads - 1 workers kept for every round) that
// run `iterations` of the loop each per round, from a common start.
// Pins the calling thread to the `index`-th CPU it may run on, when there are that
// many: a new thread starts on its parent's CPU, and the scheduler may not spread the
// threads within the probe's few milliseconds.
void pinToCpu(int index) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || seen++ != index) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    return;
  }
}

class Team {
public:
  Team(const Isa& isa, int threads) : isa_(isa) {
    if (threads > 1 && threads <= int(std::thread::hardware_concurrency())) pin_ = true;
    try {
      startWorkers(threads);
    } catch (...) { // no more threads (the process's limit): stop the started ones, then say so
      round_.store(-1, std::memory_order_release);
      for (auto& w : workers_) w.join();
      throw;
    }
  }
  void startWorkers(int threads) {
    for (int t = 1; t < threads; ++t)
      workers_.emplace_back([this, t] {
        if (pin_) pinToCpu(t);
        for (int64_t seen = 0;;) {
          int64_t round;
          while ((round = round_.load(std::memory_order_acquire)) == seen) std::this_thread::yield();
          if (round < 0) return;
          seen = round;
          sink.store(isa_.loop(iterations_), std::memory_order_relaxed);
          done_.fetch_add(1, std::memory_order_acq_rel);
        }
      });
  }
  ~Team() {
    round_.store(-1, std::memory_order_release);
    for (auto& w : workers_) w.join();
    if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof callerCpus_, &callerCpus_);
  }
  // Seconds from the start to the last thread's end.
  double run(int64_t iterations) {
    if (pin_ && !pinned_) {
      // The caller runs on the first CPU for the probe, and gets its CPU set back after.
      sched_getaffinity(0, sizeof callerCpus_, &callerCpus_);
      pinToCpu(0);
      pinned_ = true;
    }
    iterations_ = iterations;
    done_.store(0);
    auto start = Clock::now();
    round_.fetch_add(1, std::memory_order_acq_rel);
    sink.store(isa_.loop(iterations), std::memory_order_relaxed);
    while (done_.load(std::memory_order_acquire) < int(workers_.size())) std::this_thread::yield();
    return secondsSince(start);
  }

private:
  const Isa isa_;
  bool pin_ = false, pinned_ = false;
  cpu_set_t callerCpus_;
  std::vector<std::thread> workers_;
  std::atomic<int64_t> round_{0};
  std::atomic<int> done_{0};
  int64_t iterations_ = 0;
};

} // namespace

PeakFlops measurePeakFlops(int threads, double budgetMillis) {
  auto begin = Clock::now();
  PeakFlops peak;
  peak.threads = std::max(1, threads);
  Isa isa = hostIsa();
  peak.isa = isa.name;
  const double flopsPerIteration = 2.0 * kChains * isa.lanes;
  // Calibrate on the calling thread alone: double the count until a loop takes ≥ 0.5 ms,
  // then take the fastest of three at that count (one preempted loop must not set the
  // round size). Not with the team: a team round also waits for its workers to be
  // scheduled, a timeslice (ms) on a busy host, which stopped the doubling at a few
  // hundred iterations and left every later round timing that wait (a peak of 0.26
  // GFLOP/s and a share of peak of 269 during a build on the other core).
  auto solo = [&](int64_t n) {
    auto start = Clock::now();
    sink.store(isa.loop(n), std::memory_order_relaxed);
    return secondsSince(start);
  };
  int64_t iterations = 256;
  while (solo(iterations) < 5e-4 && iterations < (int64_t(1) << 40)) iterations *= 2;
  double seconds = solo(iterations);
  for (int i = 0; i < 2; ++i) seconds = std::min(seconds, solo(iterations));
  Team team(isa, peak.threads);
  // Then ~2 ms rounds until the budget is spent: the best one counts, as the one
  // least disturbed by other processes and interrupts.
  const double budget = budgetMillis * 1e-3;
  iterations = std::max<int64_t>(iterations, int64_t(double(iterations) * 2e-3 / seconds));
  for (int round = 0; round < 3 || secondsSince(begin) < budget; ++round) {
    double s = team.run(iterations);
    peak.gflops = std::max(peak.gflops, flopsPerIteration * double(iterations) * peak.threads / s * 1e-9);
  }
  peak.millis = secondsSince(begin) * 1e3;
  return peak;
}

} // namespace nnc::runtime
