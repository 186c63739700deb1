// A run takes the stack its kernels' frames and the runtime's need (runtime/KernelStack.h):
// a model run from a thread with less (a small thread stack, a low `ulimit -s`) runs on
// a thread of nnc's own and gives the bits a run from a large stack gives; one with
// enough runs where it is; a run takes no more than it says (measured on a painted
// stack); the pool's workers get the kernels' stack whatever the process's default;
// stackRoom sees how much is left.
#include <alloca.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CompileHelpers.h"
#include "DecoderChecks.h"
#include "runtime/KernelStack.h"
#include "runtime/ThreadPool.h"
#include "runtime/model/CompiledModel.h"

namespace nnc::testing {
namespace {

constexpr size_t kSmallStack = 128 * 1024; // musl's default
constexpr size_t kLargeRoom = size_t(20) << 20; // more than the least a KernelThread gets

// fn() on a thread whose stack is `bytes` (pthread's own, not a KernelThread).
void onStackOf(size_t bytes, const std::function<void()> &fn) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t thread;
  auto body = [](void *f) -> void * {
    (*static_cast<const std::function<void()> *>(f))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, const_cast<std::function<void()> *>(&fn)), 0);
  pthread_attr_destroy(&attr);
  pthread_join(thread, nullptr);
}

// A caller with about `room` bytes of stack left, as one deep in a host's own frames:
// fn() on a 2 MiB thread, below a frame that takes the rest; returns the room fn() had. (The stack a thread is
// asked for is not what it gets under the sanitizers: ThreadSanitizer gave a thread
// asked for 64 KiB 128 KiB of room.)
[[gnu::noinline]] void belowFrameOf(size_t bytes, const std::function<void()> &fn) {
  volatile char *taken = static_cast<volatile char *>(alloca(bytes));
  taken[0] = 0;
  fn();
  taken[bytes - 1] = 0;
}
size_t withRoomLeft(size_t room, const std::function<void()> &fn) {
  size_t seen = 0;
  onStackOf(size_t(2) << 20, [&] {
    const size_t have = runtime::stackRoom();
    ASSERT_GT(have, room + 16 * 1024) << "the test's thread leaves too little room to test this";
    belowFrameOf(have - room, [&] {
      seen = runtime::stackRoom();
      fn();
    });
  });
  return seen;
}

TEST(KernelStack, StackRoomIsWhatTheThreadHasLeft) {
  size_t small = 0, kernel = 0;
  onStackOf(kSmallStack, [&] { small = runtime::stackRoom(); });
  runtime::KernelThread thread([&] { kernel = runtime::stackRoom(); });
  thread.join();
  EXPECT_GT(small, 0u);
  EXPECT_LE(small, kSmallStack);
  EXPECT_GE(kernel, runtime::kKernelStackBytes - runtime::kThreadOverheadBytes);
  EXPECT_LE(kernel, runtime::kKernelStackBytes);
  size_t asked = 0;
  runtime::KernelThread roomy([&] { asked = runtime::stackRoom(); }, kLargeRoom);
  roomy.join();
  EXPECT_GE(asked, kLargeRoom);
}

// Dense layers whose kernels convert blocks of rows or widen panels into their scratch;
// a run takes kRunFrameBytes and their frames.
constexpr const char *kSource = "model m { input x: [96, 2048]\n"
                                "  a = dense(256, dtype=f16) relu\n"
                                "  b = dense(2048, dtype=i8)\n"
                                "  c = dense(192, dtype=i4) }";

TEST(KernelStack, ARunFromASmallStackGivesTheBitsOfALargeOne) {
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  auto engine = runtime::JitEngine::create();
  for (int threads : {1, 2}) {
    runtime::CompiledModel model(c.program(), *engine, threads);
    model.setWeights(runtime::WeightStore::random(c.program().tensors, 3));
    std::vector<float> x(size_t(model.inputType().elements()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 29) - 14) * 0.07f;
    std::vector<float> want(size_t(model.outputType().elements())), got(want.size(), -1.0f);
    model.run(x.data(), want.data());
    const size_t started = runtime::kernelThreadsStarted();
    const size_t room = withRoomLeft(model.runStackBytes() - 16 * 1024, [&] { model.run(x.data(), got.data()); });
    ASSERT_LT(room, model.runStackBytes()) << "else this would test nothing";
    EXPECT_EQ(runtime::kernelThreadsStarted(), started + 1) << "the run was not handed off";
    EXPECT_EQ(got, want) << threads << " threads";
  }
}

// Kernels keep their buffers in their scratch, not on the stack: a run of f32, f16, i8
// and i4 layers at 96 rows takes less than 96 KiB (a 128 KiB thread, musl's default,
// holds it), and a caller with just that much left keeps its run, with no thread started
// for it (a fixed 4 MiB threshold handed it off; the frames of these layers took up to
// 1.1 MiB, and 256 KiB were budgeted for the runtime's).
TEST(KernelStack, ARunWhoseFramesFitStaysOnTheCallersThread) {
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  auto engine = runtime::JitEngine::create();
  runtime::CompiledModel model(c.program(), *engine, 1);
  model.setWeights(runtime::WeightStore::random(c.program().tensors, 5));
  EXPECT_GE(model.runStackBytes(), runtime::kRunFrameBytes);
  EXPECT_LT(model.runStackBytes(), size_t(96) << 10);
  std::vector<float> x(size_t(model.inputType().elements()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 23) - 11) * 0.05f;
  std::vector<float> want(size_t(model.outputType().elements())), got(want.size(), -1.0f);
  model.run(x.data(), want.data());
  const size_t started = runtime::kernelThreadsStarted();
  const size_t room = withRoomLeft(model.runStackBytes() + 8 * 1024, [&] { model.run(x.data(), got.data()); });
  ASSERT_GE(room, model.runStackBytes()) << "else this would test nothing";
  EXPECT_EQ(runtime::kernelThreadsStarted(), started);
  EXPECT_EQ(got, want);
}

// How deep fn() goes, the runtime's frames and the kernels' together: fn() on a thread
// whose `bytes` of stack were painted first, from the thread's frame where fn() is
// called (glibc's TLS and thread descriptor, above it, not counted: sanitizers keep
// hundreds of KiB there) down to the deepest byte fn() changed.
size_t stackUsedBy(size_t bytes, const std::function<void()> &fn) {
  constexpr unsigned char kPaint = 0xA7;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::unique_ptr<unsigned char, decltype(&std::free)> stack(static_cast<unsigned char *>(std::aligned_alloc(page, bytes)),
                                                             &std::free);
  if (!stack) throw std::bad_alloc();
  std::memset(stack.get(), kPaint, bytes);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, stack.get(), bytes);
  struct Call {
    const std::function<void()> &fn;
    size_t roomBefore = 0;
  } call{fn};
  auto body = [](void *p) -> void * {
    auto &c = *static_cast<Call *>(p);
    c.roomBefore = runtime::stackRoom();
    c.fn();
    return nullptr;
  };
  pthread_t thread;
  if (pthread_create(&thread, &attr, body, &call) != 0) throw std::runtime_error("no thread");
  pthread_attr_destroy(&attr);
  pthread_join(thread, nullptr);
  size_t untouched = 0;
  while (untouched < bytes && stack.get()[untouched] == kPaint) ++untouched;
  return call.roomBefore > untouched ? call.roomBefore - untouched : 0;
}

// A run takes no more stack than runStackBytes() says, which budgets kRunFrameBytes for
// the runtime's own frames: dense layers in four dtypes at 96 rows, and a LLaMA-style
// decoder's forward pass (embedding, RMSNorm, attention with RoPE, the gated MLP, the
// head), each at 1 and 2 threads (the caller's part of a parallel step); and a first run
// that makes the dense layers' packed weights itself as it reaches them
// (setWeightsWhileRunning, on a host with a core left free).
TEST(KernelStack, ARunTakesNoMoreStackThanItSays) {
  const std::string llama = readText(std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/tiny_llama_b1_s17/model.nn");
  auto engine = runtime::JitEngine::create();
  struct Case {
    std::string what, source;
    int threads;
    bool weightsWhileRunning;
  };
  const std::vector<Case> cases{{"dense layers", kSource, 1, false},
                                {"dense layers", kSource, 2, false},
                                {"LLaMA-style decoder", llama, 1, false},
                                {"LLaMA-style decoder", llama, 2, false},
                                {"dense layers, weights made while running", kSource, 1, true}};
  for (const Case &k : cases) {
    SCOPED_TRACE(k.what + ", " + std::to_string(k.threads) + " thread(s)");
    auto c = test::compile(k.source, {}, true);
    ASSERT_TRUE(c.ok) << c.diagnostics;
    runtime::CompiledModel model(c.program(), *engine, k.threads);
    auto weights = std::make_shared<const runtime::WeightStore>(runtime::WeightStore::random(c.program().tensors, 7));
    std::vector<float> x(size_t(model.inputType().elements())), y(size_t(model.outputType().elements()));
    if (model.inputType().dtype == DType::I32)
      for (size_t i = 0; i < x.size(); ++i) {
        const int32_t id = int32_t(i * 7 % 61); // token ids, passed as their bits
        std::memcpy(&x[i], &id, sizeof id);
      }
    else
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 23) - 11) * 0.05f;
    if (k.weightsWhileRunning) {
      model.setWeightsWhileRunning(weights);
    } else {
      model.setWeights(*weights);
      model.run(x.data(), y.data()); // workspace made: what a run then takes
    }
    const size_t started = runtime::kernelThreadsStarted();
    const size_t used = stackUsedBy(kLargeRoom, [&] { model.run(x.data(), y.data()); });
    std::printf("%s, %d thread(s): a run used %zu bytes of stack; runStackBytes() %zu\n", k.what.c_str(), k.threads,
                used, model.runStackBytes());
    ASSERT_EQ(runtime::kernelThreadsStarted(), started) << "the run was handed off: this measured nothing";
    EXPECT_GT(used, 0u);
    EXPECT_LE(used, model.runStackBytes());
  }
}

// The pool's workers have the room they are asked for, beyond the least a KernelThread gets.
TEST(KernelStack, PoolWorkersHaveTheRoomTheModelAsksFor) {
  std::atomic<size_t> least{SIZE_MAX};
  {
    runtime::ThreadPool pool(2, kLargeRoom);
    const pthread_t caller = pthread_self();
    std::atomic<bool> workerRan{false};
    pool.parallelFor(2, [&](int64_t) {
      if (pthread_equal(pthread_self(), caller)) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!workerRan.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        return;
      }
      least = runtime::stackRoom();
      workerRan = true;
    });
  }
  ASSERT_NE(least.load(), SIZE_MAX) << "no worker took an item";
  EXPECT_GE(least.load(), kLargeRoom);
}

TEST(KernelStack, PoolWorkersGetTheKernelsStackWhateverTheDefault) {
  pthread_attr_t saved, small;
  ASSERT_EQ(pthread_getattr_default_np(&saved), 0);
  ASSERT_EQ(pthread_attr_init(&small), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&small, kSmallStack), 0);
  ASSERT_EQ(pthread_setattr_default_np(&small), 0); // what std::thread would now get
  std::atomic<size_t> least{SIZE_MAX};
  {
    runtime::ThreadPool pool(3);
    const pthread_t caller = pthread_self();
    std::atomic<int> workersSeen{0};
    // One item per participant: the caller's waits (up to 10 s) until both workers
    // have run theirs, so the workers cannot be cancelled for being late.
    pool.parallelFor(3, [&](int64_t) {
      if (pthread_equal(pthread_self(), caller)) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (workersSeen.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        return;
      }
      for (size_t room = runtime::stackRoom(), seen = least.load(); room < seen;)
        if (least.compare_exchange_weak(seen, room)) break;
      workersSeen.fetch_add(1);
    });
  }
  pthread_setattr_default_np(&saved);
  pthread_attr_destroy(&small);
  pthread_attr_destroy(&saved);
  ASSERT_NE(least.load(), SIZE_MAX) << "no worker took an item";
  EXPECT_GE(least.load(), runtime::kKernelStackBytes - runtime::kThreadOverheadBytes);
}

} // namespace
} // namespace nnc::testing
