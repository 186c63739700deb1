// Workers spin, then sleep on a condition variable, until a new job generation is
// published; then each claims its slot (Invited → Running), takes indices from its
// home range's atomic counter, then from the other ranges' (so uneven items and late
// workers balance), and marks its slot Done. The caller works on the same job
// meanwhile; when the items run out it cancels the slots still Invited and waits
// (spinning, then sleeping) for the Running ones.
//
// Ordering: the caller writes job_, jobFloatMode_ and ranges_ and then the slots (release);
// a worker whose Invited → Running exchange succeeds (acquire) therefore sees the job
// it was invited to, even if it noticed the generation bump of an earlier job. Slot
// Done is a release, read by the caller with acquire. Sleepers test their condition
// under mutex_, and whoever changes it takes mutex_ before notifying, so no wake-up
// is lost.
#include "runtime/ThreadPool.h"

#include <fmt/format.h>

#include <chrono>
#include <system_error>

#include "compiler/support/Error.h"
#include "runtime/FloatMode.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NNC_PAUSE() _mm_pause()
#else
#define NNC_PAUSE() std::this_thread::yield()
#endif

namespace nnc::runtime {

namespace {
// Spins until done() or kSpinMicros pass; returns done().
template <typename Done> bool spinUntil(Done done) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      NNC_PAUSE();
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::microseconds(ThreadPool::kSpinMicros))
      return done();
  }
}
} // namespace

ThreadPool::ThreadPool(int threads, size_t stackRoomBytes) {
  int workers = threads > 1 ? threads - 1 : 0;
  slots_ = std::make_unique<WorkerSlot[]>(size_t(workers));
  ranges_ = std::make_unique<HomeRange[]>(size_t(workers) + 1);
  try {
    for (int i = 0; i < workers; ++i)
      workers_.push_back(
          std::make_unique<KernelThread>([this, i] { workerLoop(slots_[size_t(i)], i + 1); }, stackRoomBytes));
  } catch (const std::system_error &e) { // the thread limit: stop the started ones, say so
    stop();
    throw UserError(fmt::format("cannot start {} worker threads for {} threads: {} (started {}; the process's "
                                "thread limit, `ulimit -u`?)",
                                workers, threads, e.what(), workers_.size()));
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t->join();
}

void ThreadPool::drain(int participant) {
  const int participants = size();
  for (int k = 0; k < participants; ++k) {
    HomeRange& range = ranges_[size_t((participant + k) % participants)];
    for (int64_t i; (i = range.next.fetch_add(1, std::memory_order_relaxed)) < range.end;) {
      try {
        (*job_)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!firstError_) firstError_ = std::current_exception();
      }
    }
  }
}

void ThreadPool::workerLoop(WorkerSlot& slot, int participant) {
  uint64_t seen = 0;
  for (;;) {
    auto published = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spinUntil(published)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, published);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    int invited = Invited;
    if (!slot.state.compare_exchange_strong(invited, Running, std::memory_order_acquire))
      continue; // cancelled: the caller finished without us
    setFloatMode(jobFloatMode_);
    drain(participant);
    slot.state.store(Done, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mutex_);
    if (callerSleeping_) finished_.notify_one();
  }
}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> callerLock(callerMutex_);
  job_ = &fn;
  jobFloatMode_ = floatMode();
  const int64_t participants = size();
  for (int64_t p = 0; p < participants; ++p) {
    ranges_[size_t(p)].next.store(p * n / participants, std::memory_order_relaxed);
    ranges_[size_t(p)].end = (p + 1) * n / participants;
  }
  size_t workers = workers_.size();
  for (size_t w = 0; w < workers; ++w) slots_[w].state.store(Invited, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    firstError_ = nullptr;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all(); // cheap when nobody sleeps (glibc checks for waiters first)
  drain(0);
  auto allFinished = [&] {
    for (size_t w = 0; w < workers; ++w) {
      int s = slots_[w].state.load(std::memory_order_acquire);
      if (s == Invited) // not started: cancel, unless it starts right now
        slots_[w].state.compare_exchange_strong(s, Cancelled, std::memory_order_acq_rel);
      if (s == Running) return false;
    }
    return true;
  };
  if (!spinUntil(allFinished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    callerSleeping_ = true;
    finished_.wait(lock, allFinished);
    callerSleeping_ = false;
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = nullptr;
    error = firstError_;
  }
  if (error) std::rethrow_exception(error);
}

void runEach(size_t n, const std::function<void(size_t)> &work) {
  if (n == 0) return;
  std::vector<std::exception_ptr> errors(n);
  auto guarded = [&](size_t i) {
    try {
      work(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  size_t started = 1; // index 0 is the caller's
  try {
    for (; started < n; ++started) threads.emplace_back(guarded, started);
  } catch (const std::system_error &) {
    // no more threads: the caller runs the rest below
  }
  guarded(0);
  for (size_t i = started; i < n; ++i) guarded(i);
  for (auto &t : threads) t.join();
  for (auto &e : errors)
    if (e) std::rethrow_exception(e);
}

} // namespace nnc::runtime
