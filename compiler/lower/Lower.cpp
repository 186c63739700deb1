#include "compiler/lower/Lower.h"

#include <set>
#include <stdexcept>

#include "compiler/lower/BufferPlan.h"
#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/OpTable.h"

namespace nnc::lower {

namespace {
// A decoder's prefill needs only each sequence's last position after its last
// attention: the op after which the rest runs on [batch, 1, ·] (the layers after it
// are per position: no attention, pos_embedding or view, every type [batch, seq, ·],
// and they read nothing before it), or -1 when there is none or seq is 1.
int64_t lastPositionCut(const ir::Graph &g, int64_t kvContext) {
  const int64_t seq = g.ops.front().type.shape.size() == 2 ? g.ops.front().type.shape[1] : 1;
  if (kvContext < 1 || seq < 2) return -1;
  int64_t cut = -1;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == ir::OpKind::Attention) cut = int64_t(i);
  if (cut < 0 || size_t(g.output) <= size_t(cut)) return -1;
  for (size_t j = size_t(cut); j < g.ops.size(); ++j) {
    const ir::Op &op = g.ops[j];
    if (op.type.shape.size() != 3 || op.type.shape[1] != seq) return -1;
    if (j == size_t(cut)) continue;
    if (op.kind == ir::OpKind::PosEmbedding || ops::opInfo(op.kind).isView) return -1;
    for (ir::ValueId v : op.inputs)
      if (int64_t(v) < cut) return -1;
    if (op.residualInput >= 0 && int64_t(op.residualInput) < cut) return -1;
  }
  return cut;
}
} // namespace

KernelProgram lowerGraph(const ir::Graph &graph, const Quantisation &quant, int64_t kvContext, DType kvType,
                         bool argmax) {
  if (argmax && kvContext < 1) throw std::invalid_argument("lowerGraph: the argmax step is for a decoder's program");
  ir::Graph g = graph; // after the cut, the types are made one position long
  const int64_t cut = lastPositionCut(g, kvContext);
  KernelProgram p;
  p.quant = quant;
  p.kvContext = kvContext;
  p.kvType = kvType;
  p.model = g.modelName;
  p.batch = g.batch;
  p.inputType = g.ops.front().type;
  std::vector<BufferId> valueBuffer(g.ops.size(), -1);
  LoweringContext cx(g, p, valueBuffer);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    ir::Op &op = g.ops[i];
    const ops::OpInfo &info = ops::opInfo(op.kind);
    if (cut >= 0 && int64_t(i) > cut) op.type.shape[1] = 1;
    Buffer b{op.name, i == 0 ? Buffer::Role::Input : Buffer::Role::Activation, op.type.elements(),
             op.type.shape};
    if (i > 0 && info.isView) { // a view of the input's NCHW storage (flatten reads it so)
      const BufferId base = cx.value(op.inputs[0], op).id;
      const Buffer &in = p.buffers[size_t(base)];
      b.viewOf = in.viewOf >= 0 ? in.viewOf : base;
    }
    p.buffers.push_back(std::move(b));
    valueBuffer[i] = BufferId(p.buffers.size() - 1);
    if (i > 0 && !info.isView) info.lower(cx, op);
    if (int64_t(i) == cut) { // the layers after read each sequence's last position only
      const int64_t batch = op.type.shape[0], seq = op.type.shape[1], cols = op.type.shape[2];
      p.buffers.push_back(Buffer{"last position of " + op.name, Buffer::Role::Activation, batch * cols, {batch, 1, cols}});
      const Operand last = Operand::buffer(BufferId(p.buffers.size() - 1));
      cx.step(op, codegen::LastPositionSpec{batch, seq, cols}, {Operand::buffer(valueBuffer[i]), last});
      valueBuffer[i] = last.id;
      op.type.shape[1] = 1;
    }
  }
  p.input = valueBuffer[0];
  p.output = cx.value(g.output, g.op(g.output)).id; // the caller's NCHW
  p.outputType = g.op(g.output).type;
  if (argmax) { // greedy decoding: each row's next id from its logits (docs/lowering.md)
    const ir::Op &head = g.op(g.output);
    const int64_t cols = p.outputType.shape.back(), rows = p.outputType.elements() / cols;
    p.buffers.push_back(Buffer{"next ids of " + head.name, Buffer::Role::Activation, rows, {rows}});
    p.argmax = BufferId(p.buffers.size() - 1);
    cx.step(head, codegen::ArgmaxSpec{rows, cols}, {Operand::buffer(p.output), Operand::buffer(p.argmax)});
  }
  std::set<std::string> seen;
  for (const auto &op : g.ops)
    for (const auto &t : op.params)
      if (seen.insert(t.name).second) p.tensors.push_back(t);
  for (const auto &op : g.ops)
    if (op.kind == ir::OpKind::Dense && !op.attrs.tie.empty()) p.tiedTensors[op.name + ".weight"] = op.attrs.tie + ".weight";
  planBuffers(p);
  return p;
}

} // namespace nnc::lower
