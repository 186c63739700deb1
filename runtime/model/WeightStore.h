// The f32 values of every parameter tensor a model reads (a kernel program's
// `tensors`), by PyTorch name: loaded from a .safetensors file (f32/f16/bf16
// converted) or drawn at random.
//
// Guarantees: after load, every listed tensor is present with the exact shape; a
// missing, extra or mis-shaped tensor is a UserError naming the file, the tensor and
// both shapes. With a weight map (runtime/io/WeightMap.h), the file's names are renamed
// before they are matched, and the errors name both the file's name and the mapped
// one (fileElement: for any element, as the file holds it); two file tensors mapped to
// one name are an error naming both. A tied dense's
// weight ("lm_head.weight") loads as its embedding's table when the file lacks the
// table, and beside it when the two are bitwise equal; otherwise the error names the
// first element that differs. Random weights (--random-weights SEED) follow PyTorch's
// default initialisation of nn.Linear: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)),
// norm scales 1 and shifts 0, from a SplitMix64 stream seeded by SEED and the
// tensor's name, so the same seed gives the same weights on every machine (each
// tensor's ParamTensor::init and fanIn say how).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <llvm/ADT/ArrayRef.h>
#include <vector>

#include "compiler/ir/Ir.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/WeightMap.h"

namespace nnc::runtime {

// A tensor's f32 values: owned, or a view into a weights file that the store keeps
// mapped (F32 tensors of a .safetensors file are never copied on load).
class Tensor {
public:
  Tensor() = default;
  Tensor(std::vector<int64_t> shape, std::vector<float> values) : shape(std::move(shape)), owned_(std::move(values)) {}
  Tensor(std::vector<int64_t> shape, const float *view, size_t count)
      : shape(std::move(shape)), view_(view), count_(count) {}

  std::vector<int64_t> shape;
  // Whether values() point into the mapped file (alive as long as WeightStore::fileOwner()).
  bool inFile() const { return view_ != nullptr; }
  llvm::ArrayRef<float> values() const {
    return view_ ? llvm::ArrayRef<float>(view_, count_) : llvm::ArrayRef<float>(owned_);
  }

private:
  std::vector<float> owned_;
  const float *view_ = nullptr; // into the store's file
  size_t count_ = 0;
};

class WeightStore {
public:
  // `model` names the model in errors; `map` renames the file's tensors (none: as they
  // are); `tiedTensors` (lower::KernelProgram::tiedTensors) names the tied denses'
  // weights, which the file may hold instead of the embedding's table, or beside it when equal.
  static WeightStore fromSafeTensors(const std::vector<ir::ParamTensor> &tensors, const std::string &path,
                                     const std::string &model, const WeightMap &map = {},
                                     const std::map<std::string, std::string> &tiedTensors = {});
  static WeightStore fromSafeTensors(const std::vector<ir::ParamTensor> &tensors, const SafeTensorsFile &file,
                                     const std::string &model, const WeightMap &map = {},
                                     const std::map<std::string, std::string> &tiedTensors = {});
  static WeightStore random(const std::vector<ir::ParamTensor> &tensors, uint64_t seed);

  const Tensor &get(const std::string &name) const;
  bool has(const std::string &name) const { return tensors_.count(name) != 0; }
  // Which weights these are, for the weight cache (WeightCache.h): the mapped file's
  // identity and the weight map's rules; "" when they have none (random weights, bytes
  // read from a pipe), which are never cached.
  const std::string &identity() const { return identity_; }
  // What keeps the mapped file alive (null when no tensor is a view into one): a
  // constant that points into the file holds it.
  const std::shared_ptr<const void> &fileOwner() const { return file_; }
  // Before weights are read where they lie in the mapped file (a table, weights in
  // place): the page tables of that part filled at once (MappedFile::populate); nothing
  // for weights not in a mapped file. (Packing copies rows with readRows instead.)
  void populateFile(llvm::ArrayRef<float> part) const {
    if (mapping_) mapping_->populate(part.data(), part.size() * sizeof(float));
  }
  // Copies `count` rows of K floats into `to` (count · K) with reads of the mapped file
  // (MappedFile::read: rows that follow each other in it in one read), for a packer that
  // copies them anyway (codegen::RowReader). False when a row is not in the file.
  bool readRows(const float *const *rows, int64_t count, int64_t K, float *to) const;

  // Where element `index` of tensor `name` lies in the weights file, for messages: ""
  // when the file holds the tensor under that name and shape (or the weights are not a
  // file's), else " (the file's 'NAME' [i, j])" through the weight map's renaming,
  // transposing and splitting, or the tied dense's copy that stands for the table.
  std::string fileElement(const std::string &name, const std::vector<int64_t> &index) const;

private:
  struct Origin {
    std::string name; // the file's
    WeightMap::Mapped how;
  };
  std::map<std::string, Origin> origins_; // the tensors the file holds under another name or shape
  std::map<std::string, Tensor> tensors_;
  std::string identity_;
  std::shared_ptr<const void> file_; // the weights file the views point into
  std::shared_ptr<const MappedFile> mapping_; // that file's mapping, when it is one
};

} // namespace nnc::runtime
