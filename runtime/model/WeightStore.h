// The f32 values of every parameter tensor a lowered graph needs, by PyTorch name:
// loaded from a .safetensors file (f32/f16/bf16 converted) or drawn at random.
//
// Guarantees: after load, every tensor named by an op's params is present with the
// exact shape; a missing, extra or mis-shaped tensor is a UserError naming the file,
// the tensor and both shapes. Random weights (--random-weights SEED) follow PyTorch's
// default initialisation of nn.Linear: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)),
// norm scales 1 and shifts 0, from a SplitMix64 stream seeded by SEED and the
// tensor's name, so the same seed gives the same weights on every machine.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/Ir.h"

namespace nnc::runtime {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

class WeightStore {
public:
  static WeightStore fromSafeTensors(const ir::Graph &g, const std::string &path);
  static WeightStore random(const ir::Graph &g, uint64_t seed);

  const Tensor &get(const std::string &name) const;
  bool has(const std::string &name) const { return tensors_.count(name) != 0; }

private:
  std::map<std::string, Tensor> tensors_;
};

// Every parameter tensor the graph reads, with its expected shape (tied weights are
// read from the embedding they name).
std::map<std::string, std::vector<int64_t>> expectedTensors(const ir::Graph &g);

} // namespace nnc::runtime
