// Makes a kernel program's constants from the loaded tensors, by their weight recipes
// (compiler/lower/KernelProgram.h): a tensor as it is, or a folded linear chain's
// weight or bias (W = W_k·…·W_0, b = W_k·(…) + b_k), a batchnorm folded into the layer
// before it or run as its own scale and shift, then the recipe's rows (a conv group's)
// — all in double, so a recipe adds no more rounding than one f32 store. Packing for
// a GEMM is the caller's (Gemm::pack).
#pragma once
#include <string>
#include <vector>

#include "compiler/lower/KernelProgram.h"
#include "runtime/model/WeightStore.h"

namespace nnc::runtime {

// The constant's values, row-major in its logical shape (PyTorch layout).
std::vector<float> makeConstant(const lower::WeightRecipe &recipe, const WeightStore &weights);

// For --quant per-tensor (one i8 scale per tensor): each of the constant's rows' tensor
// max |w| — of its own file tensor in a concatenation (attention's q, k, v; gated_mlp's
// gate and up), of the whole weight for a grouped conv's group, of the whole made
// tensor for a folded one — so that the scale is the tensor's however the lowering cuts
// or joins it (codegen::PackOptions::tensorMaxOfRow).
std::vector<float> tensorMaxOfRows(const lower::WeightRecipe &recipe, const WeightStore &weights);

// Where element [row, col] of the constant's rows (as packed: a transposed table's
// stored rows, a conv's (tap, channel) columns) comes from, for a message: the file
// tensor and its own index ("layers.0.attention.k.weight [3, 4]") for a tensor as it
// is, a concatenation's part or a conv group's rows; for a batchnorm folded into its
// layer, the constant's name at the layer weight's own index; the constant's name and
// [row, col] for a dense chain folded into one.
std::string elementOrigin(const lower::WeightRecipe &recipe, const WeightStore &weights, int64_t row, int64_t col);

} // namespace nnc::runtime
