#include "runtime/model/StopIds.h"

#include <algorithm>

namespace nnc::runtime {

StopIds::StopIds(std::vector<int32_t> ids, int64_t batch)
    : ids_(std::move(ids)), endedWith_(size_t(batch), -1), running_(batch) {}

int32_t StopIds::keep(int64_t b, int32_t picked) {
  int32_t &ended = endedWith_[size_t(b)];
  if (ended >= 0) return ended;
  if (std::find(ids_.begin(), ids_.end(), picked) != ids_.end()) {
    ended = picked;
    --running_;
  }
  return picked;
}

bool StopIds::allEnded() const { return !ids_.empty() && running_ == 0; }

std::vector<int32_t> StopIds::firstColumns(const std::vector<int32_t> &rows, int64_t batch, int64_t width,
                                           int64_t columns) {
  std::vector<int32_t> out;
  out.reserve(size_t(batch * columns));
  for (int64_t b = 0; b < batch; ++b)
    out.insert(out.end(), rows.begin() + b * width, rows.begin() + b * width + columns);
  return out;
}

} // namespace nnc::runtime
