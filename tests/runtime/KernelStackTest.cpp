// A run takes the stack its kernels' frames and the runtime's need (runtime/KernelStack.h):
// a model run from a thread with less (a small thread stack, a low `ulimit -s`) runs on
// a thread of nnc's own and gives the bits a run from a large stack gives; one with
// enough runs where it is; the pool's workers get the kernels' stack whatever the
// process's default; stackRoom sees how much is left.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

#include "CompileHelpers.h"
#include "runtime/KernelStack.h"
#include "runtime/ThreadPool.h"
#include "runtime/model/CompiledModel.h"

namespace nnc::testing {
namespace {

constexpr size_t kSmallStack = 256 * 1024;
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
// a run takes kRunFrameBytes and their frames, more than kSmallStack.
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
    ASSERT_GT(model.runStackBytes(), kSmallStack); // else this would test nothing
    const size_t started = runtime::kernelThreadsStarted();
    onStackOf(kSmallStack, [&] { model.run(x.data(), got.data()); });
    EXPECT_EQ(runtime::kernelThreadsStarted(), started + 1) << "the run was not handed off";
    EXPECT_EQ(got, want) << threads << " threads";
  }
}

// Kernels keep their buffers in their scratch, not on the stack: a run of f32, f16, i8
// and i4 layers at 96 rows takes little more than kRunFrameBytes, and a caller with that
// much left (a JVM thread's 1 MiB: here 2 MiB, as the sanitizers' thread-local state
// takes part of a thread's stack) keeps its run, with no thread started for it (a fixed
// 4 MiB threshold handed it off; the frames of these layers took up to 1.1 MiB).
TEST(KernelStack, ARunWhoseFramesFitStaysOnTheCallersThread) {
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  auto engine = runtime::JitEngine::create();
  runtime::CompiledModel model(c.program(), *engine, 1);
  model.setWeights(runtime::WeightStore::random(c.program().tensors, 5));
  EXPECT_GE(model.runStackBytes(), runtime::kRunFrameBytes);
  EXPECT_LT(model.runStackBytes(), runtime::kRunFrameBytes + 64 * 1024);
  constexpr size_t kThreadStack = size_t(2) << 20;
  std::vector<float> x(size_t(model.inputType().elements()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 23) - 11) * 0.05f;
  std::vector<float> want(size_t(model.outputType().elements())), got(want.size(), -1.0f);
  model.run(x.data(), want.data());
  const size_t started = runtime::kernelThreadsStarted();
  size_t room = 0;
  onStackOf(kThreadStack, [&] {
    room = runtime::stackRoom();
    model.run(x.data(), got.data());
  });
  ASSERT_GE(room, model.runStackBytes()) << "the test's thread leaves too little room to test this";
  EXPECT_EQ(runtime::kernelThreadsStarted(), started);
  EXPECT_EQ(got, want);
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
