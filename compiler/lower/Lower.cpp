#include "compiler/lower/Lower.h"

#include <set>

#include "compiler/lower/BufferPlan.h"
#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/OpTable.h"

namespace nnc::lower {

KernelProgram lowerGraph(const ir::Graph &g, const Quantisation &quant, int64_t kvContext, DType kvType) {
  KernelProgram p;
  p.quant = quant;
  p.kvContext = kvContext;
  p.kvType = kvType;
  p.model = g.modelName;
  p.batch = g.batch;
  p.inputType = g.ops.front().type;
  p.outputType = g.op(g.output).type;
  std::vector<BufferId> valueBuffer(g.ops.size(), -1);
  LoweringContext cx(g, p, valueBuffer);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const ir::Op &op = g.ops[i];
    const ops::OpInfo &info = ops::opInfo(op.kind);
    Buffer b{op.name, i == 0 ? Buffer::Role::Input : Buffer::Role::Activation, op.type.elements(),
             op.type.shape};
    if (i > 0 && info.isView) {
      const Buffer &in = p.buffers[size_t(valueBuffer[size_t(op.inputs[0])])];
      b.viewOf = in.viewOf >= 0 ? in.viewOf : valueBuffer[size_t(op.inputs[0])];
    }
    p.buffers.push_back(std::move(b));
    valueBuffer[i] = BufferId(p.buffers.size() - 1);
    if (i > 0 && !info.isView) info.lower(cx, op);
  }
  p.input = valueBuffer[0];
  p.output = valueBuffer[size_t(g.output)];
  std::set<std::string> seen;
  for (const auto &op : g.ops)
    for (const auto &t : op.params)
      if (seen.insert(t.name).second) p.tensors.push_back(t);
  planBuffers(p);
  return p;
}

} // namespace nnc::lower
