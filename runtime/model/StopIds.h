// The stop ids of a generation (`nnc --generate --stop ID`, nnc::Sampling::stop; docs/cli.md,
// "--generate"): a batch row ends at the first of them it produces, which it keeps as its
// last new id; from then on its positions repeat that id (transformers' padding when its
// pad id is the end-of-sequence id), and generating ends once every row has ended. With
// no stop ids nothing ends early.
#pragma once
#include <cstdint>
#include <vector>

namespace nnc::runtime {

class StopIds {
public:
  StopIds(std::vector<int32_t> ids, int64_t batch);
  // Row b's next id as kept: `picked`, or the stop id the row ended with before.
  int32_t keep(int64_t b, int32_t picked);
  bool allEnded() const;

  // The first `columns` of each of `batch` rows of `width` ids (row-major).
  static std::vector<int32_t> firstColumns(const std::vector<int32_t> &rows, int64_t batch, int64_t width,
                                           int64_t columns);

private:
  std::vector<int32_t> ids_;
  std::vector<int32_t> endedWith_; // per row; -1 while it runs
  int64_t running_;
};

} // namespace nnc::runtime
