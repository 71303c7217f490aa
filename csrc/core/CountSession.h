#pragma once
// The counting state machine of one profile on one thread, torch-free.
//
// The dispatcher reports every op as a nested enter/exit pair: composite ops call other ops
// (conv2d -> convolution -> _convolution -> mkldnn_convolution), and autocast re-dispatches the
// same op with cast inputs. The rules, so that nothing is counted twice or silently dropped:
//  1. The outermost op that has a counted formula (matrix, vector or memory) is counted; the
//     ops it calls are its implementation and are not counted again.
//  2. An op directly re-entered under the same name (autocast's re-dispatch) replaces its
//     caller, so the count sees the dtype the kernel really ran in.
//  3. Transparent ops (views, allocations, composite wrappers) are not counted; their callees
//     follow rule 1.
//  4. An op with no entry in the registry, not inside a counted op, is reported as unknown, by
//     name and number of calls, unless its callees were counted as arithmetic (matrix or
//     vector; a counted copy does not price its caller's work) and the counted callees read and
//     wrote at least as many bytes as its own tensor inputs hold: one priced bias add inside
//     an unpriced LSTM layer does not account for the layer's matrix work.
//  5. An op whose inputs the dispatcher could not box is treated as unknown, with rule 4.
//     So is a matrix op with a nested-tensor input: its formula needs dense shapes, and the
//     callees that do its work run on dense buffers; and an op whose formula finds that the
//     shapes do not determine its cost (Cost::unpriced): it is reported, its callees having
//     been inside it.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/Convention.h"
#include "core/FormulaRegistry.h"
#include "core/OpArgs.h"

namespace torchutil {

struct OpStats {
  std::string op;
  std::string module;  // dotted module path that called the op ("" at top level)
  std::string dtype;   // dtype of the op's first tensor input
  OpClass opClass = OpClass::Transparent;
  int64_t calls = 0;
  int64_t matrixFlops = 0;
  int64_t vectorFlops = 0;
  int64_t maskedFlops = 0;  // of the FLOPs, those a causal mask discards (Cost::maskedFlops)
  int64_t bytes = 0;

  int64_t flops() const { return saturatingAdd(matrixFlops, vectorFlops); }
  int64_t usefulFlops() const { return flops() - maskedFlops; }
};

// One op call of a counted forward, recorded when the session keeps events (kernel tracing).
struct OpEvent {
  enum class Kind : uint8_t { Counted, Inside, Transparent, Unknown, Opaque };
  std::string op;
  std::string module;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  Kind kind = Kind::Transparent;
  int64_t parent = -1;  // enclosing event
  int64_t row = -1;     // CountTable row its work is accounted in (inside ops: their owner's)
  int64_t owner = -1;   // the counted event that accounts for it (itself when counted)
};

const char* opEventKindName(OpEvent::Kind k);

struct CountTotals {
  int64_t matrixFlops = 0;
  int64_t vectorFlops = 0;
  int64_t maskedFlops = 0;
  int64_t bytes = 0;
  int64_t countedCalls = 0;
  int64_t unknownCalls = 0;
  bool saturated = false;  // a count reached kSaturatedCount (Convention.h) and was held there
  int64_t otherThreadCalls = 0;
  int64_t flops() const { return saturatingAdd(matrixFlops, vectorFlops); }
  int64_t usefulFlops() const { return flops() - maskedFlops; }
};

// The aggregated result: one row per (op, module, dtype), in first-seen order.
class CountTable {
 public:
  // Returns the row the call was added to.
  size_t add(std::string_view op, const std::string& module, std::string_view dtype, OpClass c,
             const Cost& cost, int64_t bytes);
  void addUnknown(std::string_view op, int64_t calls = 1);
  // Adds every row and unknown op of other (a forked task's count) to this table.
  void merge(const CountTable& other);
  // Op calls that ran during the count on threads that inherited the callback without counting
  // (torch.jit.fork / at::launch tasks): work the table does not hold.
  void setOtherThreadCalls(int64_t calls) { otherThreadCalls_ = calls; }

  const std::vector<OpStats>& rows() const { return rows_; }
  // (name, calls) in first-seen order.
  const std::vector<std::pair<std::string, int64_t>>& unknown() const { return unknown_; }
  CountTotals totals() const;
  // The dtype that carries the most matrix FLOPs (then the most FLOPs); "" if nothing counted.
  std::string dominantDtype() const;

 private:
  std::vector<OpStats> rows_;
  std::unordered_map<std::string, size_t> rowIndex_;
  std::string key_;  // add()'s lookup key, kept for its capacity: no allocation per call
  std::vector<std::pair<std::string, int64_t>> unknown_;
  std::unordered_map<std::string, size_t> unknownIndex_;
  int64_t otherThreadCalls_ = 0;
};

// A call a forward ran out of the dispatcher's sight (TorchScript's prim::mkldnn_convolution,
// which the interpreter runs itself), its arguments read from the model and a run of its own.
struct UnseenCall {
  std::string op;
  Args inputs;
  Args outputs;
};

// Adds each call to table as a counted op at the top level, priced by the registry's formula
// for its name; a call with no formula, or one its formula cannot price, is reported as an op
// with no formula (never priced at 0).
void countUnseenCalls(const std::vector<UnseenCall>& calls, const FormulaRegistry& registry,
                      CountTable* table);

class CountSession {
 public:
  explicit CountSession(const FormulaRegistry& registry = FormulaRegistry::global());

  // An op begins. Returns true when the op will be counted: the caller must then hand its
  // inputs to setInputs() (or call inputsUnavailable()) and its outputs to exit().
  bool enter(std::string_view name);
  // The same with the registry entry already looked up (nullptr: none), for callers that cache
  // lookups (OpCounter caches them per op name).
  bool enter(std::string_view name, const FormulaEntry* entry);
  const FormulaRegistry& registry() const { return registry_; }
  // Also takes the inputs of an op with no entry outside any counted op: rule 4 compares its
  // callees' bytes with them.
  void setInputs(Args inputs);
  void inputsUnavailable();
  // The op is someone else's business (a fake or subclass tensor): not counted, not reported;
  // its callees follow the rules.
  void markOpaque();
  // The innermost op ends. outputs may be empty when the op threw.
  void exit(const Args& outputs);
  // Whether the innermost open op is counted and so wants its outputs.
  bool topIsCounted() const;
  // Whether the innermost open op runs inside a counted one (it is never counted or reported,
  // so nothing about its inputs matters).
  bool topIsInside() const { return !frames_.empty() && frames_.back().inside; }

  // Module paths are pushed whole ("layer1.0.conv1"), not joined to the enclosing one.
  // Keeps an OpEvent per op call, timed with clock (nanoseconds), from now on.
  void recordEvents(uint64_t (*clock)());
  // Index of the innermost open op's event, -1 when none or events are off.
  int64_t currentEvent() const;
  // The event a kernel launched now is attributed to (the id a trace's hooks push): the
  // innermost open op's, or for an op inside a counted one that counted op's, its owner (the
  // kernel resolves to the same row, op and module either way). So the attributed op changes
  // only where a counted op or an op outside one begins or ends, not at each of the helpers a
  // counted op calls: a trace asks CUDA for the capture's node count (or issues a marker) at
  // each change. -1 when none or events are off.
  int64_t attributionEvent() const;
  // Events with rows resolved through their owners.
  std::vector<OpEvent> events() const;

  void enterModule(std::string_view path);
  void exitModule();
  const std::string& currentModule() const;

  size_t depth() const { return frames_.size(); }
  const CountTable& table() const { return table_; }

 private:
  struct Frame {
    std::string_view name;  // RecordFunction names are static strings owned by the schema
    const FormulaEntry* entry = nullptr;
    bool counted = false;     // this frame prices itself (rule 1)
    bool inside = false;      // within a counted frame: ignored
    bool superseded = false;  // replaced by a same-named callee (rule 2)
    bool covered = false;     // some callee was counted
    bool opaque = false;
    int64_t coveredBytes = 0;  // bytes of the counted callees (rule 4)
    int64_t prevCounted = -1;
    size_t module = 0;
    int64_t event = -1;
    Args inputs;
  };

  void closeEvent(const Frame& f, OpEvent::Kind kind, int64_t row);

  const FormulaRegistry& registry_;
  std::vector<Frame> frames_;
  int64_t counted_ = -1;  // index of the open counted frame, or -1
  // The module path stack: [0] is the top level, [depth_] the innermost module. Slots past
  // depth_ keep their strings' capacity, so entering a module allocates nothing once the stack
  // has been that deep (a module path is longer than a short string's inline buffer).
  std::vector<std::string> modules_{""};
  size_t depth_ = 0;
  CountTable table_;
  uint64_t (*clock_)() = nullptr;
  std::vector<OpEvent> events_;
};

}  // namespace torchutil
