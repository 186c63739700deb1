// A persistent pool of worker threads for data-parallel kernels.
//
// parallelFor(n, fn) calls fn(i) exactly once for every i in [0, n), spread over the
// calling thread and the workers, and returns when all calls have finished. With
// size() == 1 it runs inline on the caller (no threads exist). The first exception
// thrown by fn is rethrown in the caller after all started calls finish. Calls to
// parallelFor from several threads are serialised; fn must not call parallelFor on
// the same pool.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nnc::runtime {

class ThreadPool {
public:
  // `threads` participants in total, counting the caller; values < 1 mean 1.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallelFor(int64_t n, const std::function<void(int64_t)>& fn);

private:
  void workerLoop();
  void drain(); // claims and runs indices of the current job until none are left

  std::vector<std::thread> workers_;
  std::mutex callerMutex_; // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t jobSize_ = 0;
  std::atomic<int64_t> nextIndex_{0};
  uint64_t generation_ = 0;
  int busyWorkers_ = 0;
  bool stopping_ = false;
  std::exception_ptr firstError_;
};

} // namespace nnc::runtime
