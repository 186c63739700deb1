// Test helpers: random weights for every tensor a kernel program reads (to write as a
// .safetensors file), and a temporary directory for such files.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "compiler/lower/KernelProgram.h"
#include "runtime/io/SafeTensors.h"

namespace nnc::test {

// U(-0.5, 0.5) values for each of the program's tensors, from `seed`.
inline std::vector<NamedF32Tensor> randomWeightsFor(const lower::KernelProgram &program, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  std::vector<NamedF32Tensor> out;
  for (const auto &t : program.tensors) {
    int64_t n = 1;
    for (int64_t s : t.shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v) x = d(rng);
    out.push_back({t.name, t.shape, v});
  }
  return out;
}

// A fresh directory under the system's temporary one, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string &prefix)
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

} // namespace nnc::test
