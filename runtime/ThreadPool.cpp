// Workers sleep on a condition variable until a new job generation is published,
// then claim indices from one atomic counter (dynamic scheduling, so uneven items
// balance), and report back; the caller works on the same job meanwhile.
#include "runtime/ThreadPool.h"

namespace nnc::runtime {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain() {
  for (int64_t i; (i = nextIndex_.fetch_add(1)) < jobSize_;) {
    try {
      (*job_)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!firstError_) firstError_ = std::current_exception();
    }
  }
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    drain();
    std::lock_guard<std::mutex> lock(mutex_);
    if (--busyWorkers_ == 0) finished_.notify_one();
  }
}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> callerLock(callerMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    jobSize_ = n;
    nextIndex_.store(0);
    firstError_ = nullptr;
    busyWorkers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  drain();
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return busyWorkers_ == 0; });
    job_ = nullptr;
    error = firstError_;
  }
  if (error) std::rethrow_exception(error);
}

} // namespace nnc::runtime
