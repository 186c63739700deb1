// The perf map writer (PerfMap.h): a JITLink plugin that, once a kernel's object is
// fixed up at its final addresses, appends each callable symbol it defines.
#include "runtime/jit/PerfMap.h"
#include "runtime/EnvironmentSwitch.h"

#include <llvm/ExecutionEngine/JITLink/JITLink.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unistd.h>

#include "compiler/support/Error.h"

namespace nnc::runtime {
namespace {

// One file a process: perf reads /tmp/perf-<pid>.map, whichever engine wrote the line.
// Opened for each kernel (a handful a model), so a reader that deletes it never loses
// the lines after.
void appendLine(uint64_t start, uint64_t size, llvm::StringRef name) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::FILE* file = std::fopen(perfMapPath().c_str(), "a");
  if (!file) return; // no map is no reason to fail the run
  std::fprintf(file, "%llx %llx %.*s\n", static_cast<unsigned long long>(start), static_cast<unsigned long long>(size),
               static_cast<int>(name.size()), name.data());
  std::fclose(file);
}

// After fix-up the graph's symbols have their final addresses.
llvm::Error appendCallables(llvm::jitlink::LinkGraph& graph) {
  for (llvm::jitlink::Symbol* symbol : graph.defined_symbols())
    if (symbol->hasName() && symbol->isCallable() && symbol->getSize() > 0)
      appendLine(symbol->getAddress().getValue(), symbol->getSize(), symbol->getName());
  return llvm::Error::success();
}

class PerfMapPlugin : public llvm::orc::ObjectLinkingLayer::Plugin {
public:
  void modifyPassConfig(llvm::orc::MaterializationResponsibility&, llvm::jitlink::LinkGraph&,
                        llvm::jitlink::PassConfiguration& config) override {
    config.PostFixupPasses.emplace_back(&appendCallables);
  }
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility&) override { return llvm::Error::success(); }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey, llvm::orc::ResourceKey) override {}
};

} // namespace

std::string perfMapSetting() {
  return environmentSwitch("NNC_PERF_MAP").value_or(false) ? "on" : "off";
}

std::string perfMapPath() { return "/tmp/perf-" + std::to_string(getpid()) + ".map"; }

void addPerfMapWriter(llvm::orc::LLJIT& jit) {
  if (perfMapSetting() != "on") return;
  auto* linking = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit.getObjLinkingLayer());
  if (!linking) return; // a RuntimeDyld layer: no JITLink graph to read (not this platform's default)
  linking->addPlugin(std::make_unique<PerfMapPlugin>());
}

} // namespace nnc::runtime
