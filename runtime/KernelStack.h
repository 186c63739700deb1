// The stack JIT-compiled kernels run on. Kernels keep their large buffers in the
// runtime's per-thread scratch, not on the stack (GemmPlan::scratchBytes: a chunk's
// converted rows, a panel widened or transposed from weights in place, split nibbles,
// tile sums), so their frames take a few KiB whatever the layer. Still, a caller's stack
// can be smaller than a run's frames (a thread of a runtime with small stacks, a low
// `ulimit -s`). So the frames are measured: each kernel's object says how much stack its
// functions take (runtime/jit/StackSizes.h), a CompiledModel adds kRunFrameBytes for its
// own frames, its pool's workers get that much room or more, and a run called from a
// thread with less room left runs on such a thread instead (CompiledModel::run).
#pragma once
#include <pthread.h>

#include <cstddef>
#include <functional>
#include <memory>

namespace nnc::runtime {

// The least stack a KernelThread gets: glibc's usual default.
inline constexpr size_t kKernelStackBytes = size_t(8) << 20;
// Room for what runs beside the kernels' frames during a run: the runtime's own frames
// down to the kernel call, and the helpers kernels call (libm, the erf GELU). A run
// of dense layers or a LLaMA-style decoder's pass took 0.6-1.3 KiB beyond its kernels'
// frames (0.8-1.8 KiB under ThreadSanitizer; test KernelStack.ARunTakesNoMoreStackThanItSays),
// so this leaves a wide margin and still lets a run fit a 128 KiB thread (musl's
// default) with its kernels' frames (up to 19 KiB measured).
inline constexpr size_t kRunFrameBytes = size_t(64) << 10;
// What a thread's stack holds beyond the room it leaves: glibc puts the thread's static
// TLS and descriptor at its top, and the page-aligned guard below.
inline constexpr size_t kThreadOverheadBytes = size_t(1) << 20;

// Bytes of stack left below the caller's frame on this thread; SIZE_MAX when the
// system does not say (the thread's bounds are looked up once per thread).
size_t stackRoom();

// A thread that runs `body` with at least `roomBytes` of stack left, on a stack of
// kKernelStackBytes or more (std::thread takes the process default, which `ulimit -s`
// sets). `body` must not throw. The constructor throws std::system_error when the
// system gives no thread; join() before destruction.
class KernelThread {
public:
  explicit KernelThread(std::function<void()> body, size_t roomBytes = 0);
  KernelThread(const KernelThread &) = delete;
  KernelThread &operator=(const KernelThread &) = delete;
  void join();

private:
  std::unique_ptr<std::function<void()>> body_; // where the thread finds it
  pthread_t thread_{};
};

// How many KernelThreads this process has started (pool workers and runs handed off).
size_t kernelThreadsStarted();

// fn() on a KernelThread of its own with `roomBytes` of room, waited for; rethrows
// what fn threw.
void runOnKernelStack(const std::function<void()> &fn, size_t roomBytes);

} // namespace nnc::runtime
