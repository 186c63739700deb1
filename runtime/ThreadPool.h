// A persistent pool of worker threads for data-parallel kernels.
//
// parallelFor(n, fn) calls fn(i) exactly once for every i in [0, n), spread over the
// calling thread and the workers, and returns when all calls have finished. With
// size() == 1 it runs inline on the caller (no threads exist). The first exception
// thrown by fn is rethrown in the caller after all started calls finish. Calls to
// parallelFor from several threads are serialised; fn must not call parallelFor on
// the same pool.
//
// Wake-up cost: a kernel call on a small shape takes a few microseconds, a futex
// wake-up and the sleeper's reschedule as long again. So after each job the workers
// spin (with `pause`) for kSpinMicros watching the job generation before they block
// on the condition variable, and the caller spins likewise before it blocks. Back-to-
// back calls (the layers of a model) thus never sleep; an idle pool stops burning its
// cores after kSpinMicros. A worker that has not started on a job by the time the
// caller has run out of items is cancelled instead of waited for, so a worker that is
// descheduled (a busy machine) costs the caller nothing.
//
// Affinity: the items are cut into one contiguous home range per participant (the
// caller is participant 0, worker w is w + 1); each takes its own range first and
// only then helps with the others'. So when every participant runs, the same one
// handles the same items on every call, and a GEMM task finds its weight panels in
// the L2 of the core that used them last time (with one shared counter, which core
// got which panel changed from call to call).
//
// Floating-point mode: a worker computes a job in the mode (MXCSR, FloatMode.h) of the
// thread that called parallelFor, so that a row's bits do not depend on which thread
// ran it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/KernelStack.h"

namespace nnc::runtime {

class ThreadPool {
public:
  // How long an idle worker (or a waiting caller) spins before it blocks.
  static constexpr int kSpinMicros = 200;

  // `threads` participants in total, counting the caller; values < 1 mean 1. The
  // workers are KernelThreads with at least `stackRoomBytes` of stack left for `fn`.
  explicit ThreadPool(int threads, size_t stackRoomBytes = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallelFor(int64_t n, const std::function<void(int64_t)>& fn);

private:
  void stop(); // wakes the workers to exit and joins them (the destructor, a failed start)
  // A worker's part in the current job: the caller sets Invited before publishing;
  // the worker moves Invited → Running → Done, or the caller Invited → Cancelled.
  enum Slot : int { Idle, Invited, Running, Done, Cancelled };
  struct alignas(64) WorkerSlot {
    std::atomic<int> state{Idle};
  };

  void workerLoop(WorkerSlot& slot, int participant);
  // Claims and runs indices of the current job until none are left: the home range of
  // `participant` first, then the others' in turn.
  void drain(int participant);
  struct alignas(64) HomeRange {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };

  std::vector<std::unique_ptr<KernelThread>> workers_; // on the kernels' stack (KernelStack.h)
  std::unique_ptr<WorkerSlot[]> slots_;
  std::mutex callerMutex_; // one job at a time
  std::mutex mutex_;       // the sleeping side: generation_ bumps, callerSleeping_, firstError_
  std::condition_variable wake_, finished_;
  const std::function<void(int64_t)>* job_ = nullptr;
  uint32_t jobFloatMode_ = 0; // the caller's MXCSR, written with job_
  std::unique_ptr<HomeRange[]> ranges_; // one per participant
  alignas(64) std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false}; // set before a generation_ bump
  bool callerSleeping_ = false;
  std::exception_ptr firstError_;
};

// work(0) … work(n - 1), side by side: each index on a thread of its own while the
// system gives threads, and on the caller's thread (one after another) once it does
// not — a process at its thread limit runs slower, not into std::terminate. Returns
// when all have finished; then rethrows the first exception any of them threw.
void runEach(size_t n, const std::function<void(size_t)>& work);

} // namespace nnc::runtime
