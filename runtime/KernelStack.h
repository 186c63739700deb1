// The stack JIT-compiled kernels run on. Kernels keep their scratch on the stack: a
// chunk's converted rows (up to 1 MiB with AMX tiles: DotGemmEmitter.h,
// kMaxConvertedBytes), panels widened or transposed from weights in place (up to 1 MiB:
// GemmPlan.h, kMaxStackPanelFloats), split nibbles, tile sums. On a thread with a small
// stack — a JVM thread's 1 MiB, a low `ulimit -s` — that overflows: a GEMM of plain i4
// weights on AMX tiles (1024 × 4096 × 4096) crashed the CLI under `ulimit -s 1024`. So
// the pool's workers get kKernelStackBytes of their own, and a run called from a thread
// with less than kKernelStackRoomBytes left runs on such a thread instead
// (CompiledModel::run). A dot kernel's block of converted rows grows with K (digit
// products on AMX tiles: 48 bytes a k step), up to kMaxTileBlockBytes (7 MiB) before
// the vector kernels take over (DotGemmEmitter.h); so a layer that wide (K over some
// 80,000 at 8 rows or more with digit products on tiles, as
// examples/seeds/image_linear.nn's 150,528) still needs more than the 4 MiB of room
// this asks of a caller: not handled.
#pragma once
#include <pthread.h>

#include <cstddef>
#include <functional>
#include <memory>

namespace nnc::runtime {

inline constexpr size_t kKernelStackBytes = size_t(8) << 20; // glibc's usual default
inline constexpr size_t kKernelStackRoomBytes = size_t(4) << 20;

// Bytes of stack left below the caller's frame on this thread; SIZE_MAX when the
// system does not say (the thread's bounds are looked up once per thread).
size_t stackRoom();

// A thread that runs `body` on a stack of kKernelStackBytes (std::thread takes the
// process default, which `ulimit -s` sets). `body` must not throw. The constructor
// throws std::system_error when the system gives no thread; join() before destruction.
class KernelThread {
public:
  explicit KernelThread(std::function<void()> body);
  KernelThread(const KernelThread &) = delete;
  KernelThread &operator=(const KernelThread &) = delete;
  void join();

private:
  std::unique_ptr<std::function<void()>> body_; // where the thread finds it
  pthread_t thread_{};
};

// fn() on a KernelThread of its own, waited for; rethrows what fn threw.
void runOnKernelStack(const std::function<void()> &fn);

} // namespace nnc::runtime
