// The typed IR. A model is a Graph: ops in execution order, each producing one value
// with a TensorType (dtype + static shape whose first axis is the batch). There is one
// OpKind per layer kind of LANGUAGE.md, plus Input and Add (the join of `residual`).
// Composite layers (attention, mlp, gated_mlp) stay one op here, so every analysis sees
// the layer the user wrote; codegen lowers them to GEMMs and small kernels.
//
// The frontend builds ops with kinds, attributes and inputs; ShapeInferencePass fills
// in every type and parameter tensor. After it, the verifier's invariants hold.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/DType.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::ir {

enum class OpKind : uint8_t {
  Input,
  Dense, Conv2d, Depthwise,
  MaxPool, AvgPool, GlobalAvgPool, Flatten,
  Relu, Relu6, Sigmoid, Tanh, Gelu, GeluTanh, Silu, Softmax, Identity, Dropout,
  Lrn, BatchNorm, LayerNorm, RmsNorm,
  Embedding, PosEmbedding, Attention, Mlp, GatedMlp,
  Add,
};

// The layer's name in the language ("dense", "gelu_tanh", ...).
const char *opKindName(OpKind k);
std::optional<OpKind> opKindFromName(const std::string &name);
// Every layer kind a program may write, for "did you mean".
std::vector<std::string> layerKindNames();

bool isElementwiseActivation(OpKind k); // relu ... silu (not softmax)

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape; // shape[0] is the batch axis
  int64_t elements() const;   // throws CountOverflow
  std::string str() const;    // "f32[1, 784]"
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

// Every option of every layer kind, by name; only those the kind has are meaningful.
struct LayerAttrs {
  int64_t out = 0, in = 0;                   // dense, conv2d (out)
  bool bias = true;
  std::string tie;                           // dense: name of an embedding
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0; // conv / pool
  int64_t groups = 1, multiplier = 1;
  double eps = 0, p = 0, alpha = 0, beta = 0, k = 0; // norms, dropout, lrn
  int64_t size = 0;                          // lrn
  int64_t vocab = 0, dim = 0, maxLen = 0;    // embeddings
  int64_t heads = 0, kvHeads = 0;            // attention
  bool causal = true, rope = false;
  double ropeTheta = 10000;
  int64_t hidden = 0;                        // mlp, gated_mlp
  OpKind act = OpKind::Gelu;                 // mlp, gated_mlp
};

struct ParamTensor {
  enum class Role : uint8_t { Weight, Bias, Buffer }; // Buffer: batchnorm running stats
  std::string name;           // full PyTorch name, e.g. "layers.0.attention.q.weight"
  std::vector<int64_t> shape; // PyTorch layout
  Role role = Role::Weight;
  // How --random-weights fills it (PyTorch's default initialisation of the layer):
  // uniform in ±1/sqrt(fanIn) (nn.Linear, nn.Conv2d; a bias uses its weight's fan-in),
  // or constant ones / zeros (norm scales and running variances / shifts and means).
  enum class Init : uint8_t { Uniform, Ones, Zeros };
  Init init = Init::Uniform;
  int64_t fanIn = 1;
  int64_t count() const;
};

using ValueId = int32_t; // index of the producing op in Graph::ops

struct Op {
  OpKind kind = OpKind::Identity;
  std::string name;          // weight path ("fc1", "layers.3.attention", "2")
  SourceRange loc;           // the layer statement
  std::map<std::string, SourceRange> argLocs; // where each written option is
  std::vector<ValueId> inputs;
  LayerAttrs attrs;
  DType weightDType = DType::F32; // storage type of this op's parameters
  bool isLayer = true;            // false for ops the frontend adds (residual joins)
  // Set by rewrites (the report still describes the program as written):
  std::vector<std::string> foldedFrom; // FoldLinearChains: the dense layers this one replaces
  OpKind epilogue = OpKind::Identity;  // FuseEpilogues: activation applied in this op's kernel
  ValueId residualInput = -1;          // FuseEpilogues: value added after the activation
  OpKind afterResidual = OpKind::Identity; // FuseEpilogues: activation applied after that add
  std::string foldedNorm;              // FuseEpilogues: the batchnorm folded into this op's weights
  double foldedNormEps = 0;            //   and its eps
  // Filled by shape inference:
  TensorType type;
  std::vector<ParamTensor> params; // owned parameters (a tied dense owns none)
  bool typed = false;
};

struct Graph {
  std::string modelName;
  int64_t batch = 1;
  std::vector<Op> ops; // ops[0] is the Input
  ValueId output = -1;
  // The model parameters the input's one axis is written with (`input t: i32[seq]`,
  // `i32[3*seq]`): what sets a decoder's context. Empty when it is a number.
  std::vector<std::string> inputLengthParameters;
  // Whether the axis is that one parameter itself, so that --set seq=N makes it N.
  bool inputLengthIsParameter = false;

  const Op &op(ValueId v) const { return ops.at(size_t(v)); }
  Op &op(ValueId v) { return ops.at(size_t(v)); }
};

} // namespace nnc::ir
