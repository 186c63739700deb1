#include "runtime/model/MemoryBill.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/codegen/GemmEmitter.h"
#include "compiler/support/CheckedMath.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"

namespace nnc::runtime {

namespace {
int64_t saturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }
// count × 4 bytes, saturating.
int64_t f32Bytes(int64_t count) { return count > INT64_MAX / 4 ? INT64_MAX : count * 4; }
int64_t productOf(const std::vector<int64_t>& shape) {
  try {
    int64_t n = 1;
    for (int64_t d : shape) n = mulChecked(n, d);
    return n;
  } catch (const CountOverflow&) {
    return INT64_MAX;
  }
}
std::string bytesText(int64_t bytes) {
  if (bytes == INT64_MAX) return "more than 2^63 bytes";
  if (bytes < 1024) return fmt::format("{} bytes", withCommas(bytes));
  const char *unit = bytes < (1LL << 20) ? "KiB" : bytes < (1LL << 30) ? "MiB" : "GiB";
  const double scale = double(bytes < (1LL << 20) ? 1LL << 10 : bytes < (1LL << 30) ? 1LL << 20 : 1LL << 30);
  return fmt::format("{} bytes ({:.2f} {})", withCommas(bytes), double(bytes) / scale, unit);
}
// "fc1.weight" -> "fc1"
std::string layerOf(const std::string& tensor) {
  size_t dot = tensor.rfind('.');
  return dot == std::string::npos ? tensor : tensor.substr(0, dot);
}
} // namespace

MemoryBill memoryBill(const lower::KernelProgram& program, const codegen::MicroKernelShape& microKernel,
                      int64_t weightsFileBytes, int64_t inputBytes, const lower::KernelProgram* step) {
  MemoryBill bill;
  int64_t store = 0;
  std::map<std::string, int64_t> perLayer;
  for (const auto& t : program.tensors) {
    int64_t bytes = f32Bytes(productOf(t.shape));
    store = saturatingAdd(store, bytes);
    int64_t& layer = perLayer[layerOf(t.name)];
    layer = saturatingAdd(layer, bytes);
  }
  int64_t packed = 0, plain = 0, scratch = 0;
  for (const auto& recipe : program.constants) {
    int64_t logical = f32Bytes(productOf(recipe.shape));
    if (recipe.packFor) {
      int64_t panels = INT64_MAX;
      try {
        panels = codegen::gemmPanelLayout(*recipe.packFor, microKernel).totalBytesChecked(); // in its dtype
      } catch (const CountOverflow&) {
      }
      packed = saturatingAdd(packed, panels);
      scratch = std::max(scratch, logical); // the recipe's f32 values while they are packed
    } else if (recipe.storage != DType::F32) { // rowTableLayout: its bytes in its dtype
      const int64_t rows = recipe.shape.size() > 1 ? recipe.shape[0] : 1;
      int64_t bytes = INT64_MAX;
      try {
        bytes = codegen::rowTableLayout(rows, recipe.shape.back(), recipe.storage, program.quant.group).totalBytesChecked();
      } catch (const CountOverflow&) {
      }
      plain = saturatingAdd(plain, bytes);
      scratch = std::max(scratch, logical); // its f32 values while it is stored
    } else {
      plain = saturatingAdd(plain, logical);
    }
  }
  auto arenaOf = [](const lower::KernelProgram& p) { return f32Bytes(std::max<int64_t>(p.arenaFloats, 16)); };
  bill.parts = {{"weight file, read whole", weightsFileBytes},
                {"weights as f32", store},
                {"packed GEMM panels", packed},
                {"other constants (biases, norms, RoPE tables)", plain},
                {"packing scratch (the largest packed weight as f32)", scratch},
                {"activation arena", arenaOf(program)},
                {"input", inputBytes},
                {"output", f32Bytes(program.outputType.elements())}};
  // The decoder's state (its KV cache): the program's, or the step program's when
  // `program` is the model run whole (the library's DecoderModel bills it so).
  const int64_t state = std::max(program.stateFloats, step ? step->stateFloats : 0);
  if (state > 0) bill.parts.push_back({"KV cache", f32Bytes(state)});
  if (step) {
    bill.parts.push_back({"decode step's activation arena", arenaOf(*step)});
    bill.parts.push_back({"decode step's output", f32Bytes(step->outputType.elements())});
  }
  for (const auto& p : bill.parts) bill.total = saturatingAdd(bill.total, p.bytes);
  for (const auto& [layer, bytes] : perLayer)
    if (bytes > bill.largestLayerBytes) bill.largestLayer = layer, bill.largestLayerBytes = bytes;
  // Its step: the layer itself, or the layer it is part of (`layers.0.mlp.down`, a
  // tensor prefix inside the gated_mlp `layers.0.mlp`).
  size_t matched = 0; // the longest such layer name
  for (const auto& s : program.steps)
    if (s.layer.size() > matched &&
        (s.layer == bill.largestLayer || bill.largestLayer.rfind(s.layer + ".", 0) == 0)) {
      bill.largestLayerWhere = fmt::format("{}, line {}", s.opKind, s.line);
      matched = s.layer.size();
    }
  return bill;
}

int64_t availableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib > INT64_MAX / 1024 ? INT64_MAX : kib * 1024;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0) return int64_t(pages) * int64_t(pageSize);
  return 0;
}

void checkMemoryBill(const MemoryBill& bill, const std::string& model, int64_t batch, int64_t limitBytes,
                     const std::string& limitWhat) {
  if (bill.total <= limitBytes) return;
  std::string parts;
  for (const auto& p : bill.parts)
    if (p.bytes) parts += fmt::format("\n  {:<52} {}", p.what + ":", bytesText(p.bytes));
  std::string largest =
      bill.largestLayer.empty()
          ? std::string()
          : fmt::format("\nthe largest layer is '{}'{} with {} of weights (f32)", clipped(bill.largestLayer),
                        bill.largestLayerWhere.empty() ? "" : fmt::format(" ({})", bill.largestLayerWhere),
                        bytesText(bill.largestLayerBytes));
  throw UserError(fmt::format("model '{}' at batch {} needs up to {} of memory, more than {} ({}); nothing was "
                              "allocated:{}{}",
                              model, batch, bytesText(bill.total), limitWhat, bytesText(limitBytes), parts, largest),
                  std::any_of(bill.parts.begin(), bill.parts.end(), [](const auto &p) { return p.what == "KV cache"; })
                      ? UserError::Topic::DecoderMemory
                      : UserError::Topic::Memory);
}

} // namespace nnc::runtime
