#include "runtime/KernelStack.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <system_error>

namespace nnc::runtime {

namespace {
// The lowest address of this thread's stack (above its guard), 0 when unknown. For the
// main thread glibc reads /proc/self/maps: once per thread, not per call.
uintptr_t stackLow() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void *addr = nullptr;
  size_t size = 0;
  const bool known = pthread_attr_getstack(&attr, &addr, &size) == 0;
  pthread_attr_destroy(&attr);
  return known ? reinterpret_cast<uintptr_t>(addr) : 0;
}

std::atomic<size_t> started{0};

void *runBody(void *body) {
  try {
    (*static_cast<std::function<void()> *>(body))();
  } catch (...) {
    std::terminate(); // as std::thread does
  }
  return nullptr;
}
} // namespace

size_t stackRoom() {
  thread_local const uintptr_t low = stackLow();
  if (low == 0) return SIZE_MAX;
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return here > low ? here - low : 0;
}

KernelThread::KernelThread(std::function<void()> body, size_t roomBytes)
    : body_(std::make_unique<std::function<void()>>(std::move(body))) {
  pthread_attr_t attr;
  int error = pthread_attr_init(&attr);
  if (error == 0) {
    error = pthread_attr_setstacksize(&attr, std::max(kKernelStackBytes, roomBytes + kThreadOverheadBytes));
    if (error == 0) error = pthread_create(&thread_, &attr, runBody, body_.get());
    pthread_attr_destroy(&attr);
  }
  if (error != 0) throw std::system_error(error, std::generic_category(), "cannot start a thread");
  started.fetch_add(1, std::memory_order_relaxed);
}

size_t kernelThreadsStarted() { return started.load(std::memory_order_relaxed); }

void KernelThread::join() { pthread_join(thread_, nullptr); }

void runOnKernelStack(const std::function<void()> &fn, size_t roomBytes) {
  std::exception_ptr error;
  KernelThread thread(
      [&] {
        try {
          fn();
        } catch (...) {
          error = std::current_exception();
        }
      },
      roomBytes);
  thread.join();
  if (error) std::rethrow_exception(error);
}

} // namespace nnc::runtime
