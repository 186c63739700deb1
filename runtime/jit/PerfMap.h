// Linux perf's map of JIT-compiled code: with NNC_PERF_MAP=on every kernel the JIT
// links (compiled or from the kernel cache) gets a line "START SIZE NAME" in
// /tmp/perf-<pid>.map, the file `perf report` and `perf top` read to name addresses
// outside any mapped file, so a profile of `nnc --run` or `--generate` shows which
// kernels the time went to (docs/cli.md, "Profiling the kernels with perf").
#pragma once

#include <string>

namespace llvm::orc {
class LLJIT;
}

namespace nnc::runtime {

// "on" or "off" from NNC_PERF_MAP ("off" when unset); anything else throws UsageError.
std::string perfMapSetting();

// Adds the map's writer to the JIT's linking layer when NNC_PERF_MAP=on: one file a
// process, shared by its engines, each kernel's line appended once it is linked. perf
// maps cannot take a line back, so a destroyed engine's lines stay.
void addPerfMapWriter(llvm::orc::LLJIT& jit);

// The map's path for this process.
std::string perfMapPath();

} // namespace nnc::runtime
