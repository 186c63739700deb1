#include "runtime/EnvironmentSwitch.h"

#include <strings.h>

#include <cstdlib>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/support/Error.h"
#include "runtime/jit/WeightPrefetch.h"
#include "runtime/model/WeightCache.h"

namespace nnc::runtime {

std::optional<bool> environmentSwitch(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  for (const char *on : {"on", "1", "true", "yes"})
    if (strcasecmp(v, on) == 0) return true;
  for (const char *off : {"off", "0", "false", "no"})
    if (strcasecmp(v, off) == 0) return false;
  throw UsageError(std::string(name) + "=" + v + ": expected on or off (or 1 / 0, true / false, yes / no)");
}

void checkEnvironment() {
  for (const char *name : {"NNC_CACHE", "NNC_WEIGHT_CACHE", "NNC_DIGIT_PRODUCTS", "NNC_PERF_MAP",
                           "NNC_WEIGHTS_WHILE_RUNNING", "NNC_PAIRED_PANELS", "NNC_PREFETCH_DOT"})
    environmentSwitch(name);
  forcedWeightPrefetch(); // on / off, or a distance
  if (const char *isa = std::getenv("NNC_ISA"); isa && *isa && !codegen::findMicroKernel(isa))
    throw UsageError(std::string("NNC_ISA=") + isa + ": no such kernel row (avx512, avx2, avx, sse2)");
  WeightCache::maxBytesFromEnvironment();
}

} // namespace nnc::runtime
