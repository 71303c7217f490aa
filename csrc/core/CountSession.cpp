#include "core/CountSession.h"

#include <algorithm>
#include <map>

#include "core/Convention.h"

namespace torchutil {

size_t CountTable::add(std::string_view op, const std::string& module, std::string_view dtype,
                       OpClass c, const Cost& cost, int64_t bytes) {
  key_.clear();
  key_.append(op).push_back('\x1f');
  key_.append(module).push_back('\x1f');
  key_.append(dtype);
  auto it = rowIndex_.find(key_);
  size_t i;
  if (it == rowIndex_.end()) {
    i = rows_.size();
    rowIndex_.emplace(key_, i);
    OpStats row;
    row.op = std::string(op);
    row.module = module;
    row.dtype = std::string(dtype);
    row.opClass = c;
    rows_.push_back(std::move(row));
  } else {
    i = it->second;
  }
  OpStats& row = rows_[i];
  row.calls += 1;
  row.matrixFlops = saturatingAdd(row.matrixFlops, cost.matrixFlops);
  row.vectorFlops = saturatingAdd(row.vectorFlops, cost.vectorFlops);
  row.maskedFlops = saturatingAdd(row.maskedFlops, cost.maskedFlops);
  row.bytes = saturatingAdd(row.bytes, bytes);
  return i;
}

void CountTable::addUnknown(std::string_view op, int64_t calls) {
  std::string name(op);
  auto it = unknownIndex_.find(name);
  if (it == unknownIndex_.end()) {
    unknownIndex_.emplace(name, unknown_.size());
    unknown_.emplace_back(std::move(name), calls);
  } else {
    unknown_[it->second].second += calls;
  }
}

void CountTable::merge(const CountTable& other) {
  for (const OpStats& r : other.rows_) {
    const size_t i = add(r.op, r.module, r.dtype, r.opClass,
                         Cost{r.matrixFlops, r.vectorFlops, r.maskedFlops}, r.bytes);
    rows_[i].calls += r.calls - 1;
  }
  for (const auto& [name, calls] : other.unknown_) {
    addUnknown(name, calls);
  }
}

CountTotals CountTable::totals() const {
  CountTotals t;
  for (const OpStats& r : rows_) {
    t.matrixFlops = saturatingAdd(t.matrixFlops, r.matrixFlops);
    t.vectorFlops = saturatingAdd(t.vectorFlops, r.vectorFlops);
    t.maskedFlops = saturatingAdd(t.maskedFlops, r.maskedFlops);
    t.bytes = saturatingAdd(t.bytes, r.bytes);
    t.countedCalls += r.calls;
  }
  t.saturated = t.flops() == kSaturatedCount || t.bytes == kSaturatedCount;
  t.otherThreadCalls = otherThreadCalls_;
  for (const auto& u : unknown_) {
    t.unknownCalls += u.second;
  }
  return t;
}

std::string CountTable::dominantDtype() const {
  std::map<std::string, std::pair<int64_t, int64_t>> byDtype;  // dtype -> (matrix, all)
  for (const OpStats& r : rows_) {
    if (r.dtype.empty()) {
      continue;
    }
    auto& acc = byDtype[r.dtype];
    acc.first = saturatingAdd(acc.first, r.matrixFlops);
    acc.second = saturatingAdd(acc.second, r.flops());
  }
  std::string best;
  std::pair<int64_t, int64_t> bestScore{-1, -1};
  for (const auto& kv : byDtype) {
    if (kv.second > bestScore) {
      bestScore = kv.second;
      best = kv.first;
    }
  }
  return best;
}

void countUnseenCalls(const std::vector<UnseenCall>& calls, const FormulaRegistry& registry,
                      CountTable* table) {
  for (const UnseenCall& call : calls) {
    const FormulaEntry* e = registry.find(call.op);
    const Cost cost = e != nullptr && e->priced() ? e->price(call.inputs, call.outputs) : Cost{};
    if (e == nullptr || !e->priced() || cost.unpriced) {
      table->addUnknown(call.op);
      continue;
    }
    const TensorInfo* first = firstTensor(call.inputs);
    const char* dtype = cost.dtype != nullptr ? cost.dtype : first != nullptr ? first->dtype : "";
    const int64_t bytes = cost.bytes >= 0
                              ? cost.bytes
                              : saturatingAdd(totalBytes(call.inputs), totalBytes(call.outputs));
    table->add(call.op, /*module=*/"", dtype, e->rowClass(cost), cost, bytes);
  }
}

const char* opEventKindName(OpEvent::Kind k) {
  switch (k) {
    case OpEvent::Kind::Counted: return "counted";
    case OpEvent::Kind::Inside: return "inside";
    case OpEvent::Kind::Transparent: return "transparent";
    case OpEvent::Kind::Unknown: return "unknown";
    case OpEvent::Kind::Opaque: return "opaque";
  }
  return "?";
}

namespace {

bool isIntegral(std::string_view dtype) {
  for (std::string_view d :
       {"int64", "int32", "int16", "int8", "uint8", "bool", "uint16", "uint32", "uint64"}) {
    if (dtype == d) {
      return true;
    }
  }
  return false;
}

// No tensor among args holds floating-point (or complex) values.
bool allIntegral(const Args& args) {
  for (const Arg& a : args) {
    if (a.kind == ArgKind::Tensor && !isIntegral(a.tensor.dtype)) {
      return false;
    }
    if (a.kind == ArgKind::TensorList) {
      for (const TensorInfo& t : a.tensors) {
        if (!isIntegral(t.dtype)) {
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

CountSession::CountSession(const FormulaRegistry& registry) : registry_(registry) {
  frames_.reserve(64);
}

bool CountSession::enter(std::string_view name) {
  return enter(name, registry_.find(name));
}

bool CountSession::enter(std::string_view name, const FormulaEntry* entry) {
  Frame f;
  f.name = name;
  f.entry = entry;
  f.module = depth_;
  const bool countable = f.entry != nullptr && f.entry->opClass != OpClass::Transparent;
  if (clock_ != nullptr) {
    f.event = static_cast<int64_t>(events_.size());
    OpEvent e;
    e.op = std::string(name);
    e.module = modules_[depth_];
    e.startNs = clock_();
    e.parent = frames_.empty() ? -1 : frames_.back().event;
    e.owner = counted_ >= 0 ? frames_[static_cast<size_t>(counted_)].event : -1;
    events_.push_back(std::move(e));
  }
  if (counted_ >= 0) {
    Frame& top = frames_.back();
    const bool redispatch =
        countable && static_cast<size_t>(counted_) + 1 == frames_.size() && top.name == name;
    if (!redispatch) {
      f.inside = true;
      frames_.push_back(std::move(f));
      return false;
    }
    top.superseded = true;  // rule 2: the callee, with the kernel's real inputs, counts
    if (top.event >= 0) {
      events_[static_cast<size_t>(top.event)].owner = f.event;
    }
  }
  if (countable) {
    if (f.event >= 0) {
      events_[static_cast<size_t>(f.event)].owner = f.event;
    }
    f.counted = true;
    f.prevCounted = counted_;
    counted_ = static_cast<int64_t>(frames_.size());
  }
  frames_.push_back(std::move(f));
  return countable;
}

void CountSession::setInputs(Args inputs) {
  if (frames_.empty()) {
    return;
  }
  Frame& f = frames_.back();
  if (f.counted && f.entry->opClass == OpClass::Matrix && anyNested(inputs)) {
    // A contraction's formula needs the dense shape a nested tensor lacks (the fast path's
    // attention on a padded batch): its callees, which run on dense buffers, price it.
    inputsUnavailable();
    f.inputs = std::move(inputs);
    return;
  }
  f.inputs = std::move(inputs);
}

void CountSession::inputsUnavailable() {
  if (frames_.empty() || !frames_.back().counted) {
    return;
  }
  Frame& f = frames_.back();
  f.counted = false;
  counted_ = f.prevCounted;
  f.entry = nullptr;  // rule 5: priced by its callees, or reported
  int64_t owner = -1;
  if (counted_ >= 0 && static_cast<size_t>(counted_) + 2 == frames_.size()) {
    // A re-dispatch: its caller counts the call with its own inputs again, and this frame is
    // inside it (not also reported as unknown).
    Frame& caller = frames_[static_cast<size_t>(counted_)];
    caller.superseded = false;
    if (caller.event >= 0) {
      events_[static_cast<size_t>(caller.event)].owner = caller.event;
    }
    f.inside = true;
    owner = caller.event;
  }
  if (f.event >= 0) {
    events_[static_cast<size_t>(f.event)].owner = owner;
  }
}

void CountSession::markOpaque() {
  if (frames_.empty()) {
    return;
  }
  Frame& f = frames_.back();
  if (f.counted) {
    f.counted = false;
    counted_ = f.prevCounted;
    if (f.event >= 0) {
      events_[static_cast<size_t>(f.event)].owner = -1;
    }
  }
  f.opaque = true;
}

bool CountSession::topIsCounted() const {
  return !frames_.empty() && frames_.back().counted;
}

void CountSession::exit(const Args& outputs) {
  if (frames_.empty()) {
    return;  // an op that began before this session started
  }
  Frame f = std::move(frames_.back());
  frames_.pop_back();
  Frame* parent = frames_.empty() ? nullptr : &frames_.back();
  bool covered = f.covered;
  if (f.counted) {
    counted_ = f.prevCounted;
    const Cost cost = f.superseded ? Cost{} : f.entry->price(f.inputs, outputs);
    if (f.superseded) {
      closeEvent(f, OpEvent::Kind::Transparent, -1);
    } else if (cost.unpriced) {
      // Rule 5: the shapes do not say what it cost (roi_align's adaptive sampling).
      table_.addUnknown(f.name);
      closeEvent(f, OpEvent::Kind::Unknown, -1);
    } else {
      const TensorInfo* first = firstTensor(f.inputs);
      Cost priced = cost;
      if (f.entry->opClass == OpClass::Vector && first != nullptr && allIntegral(f.inputs)) {
        priced.vectorFlops = 0;  // integer arithmetic (a step counter) is no floating-point work
      }
      const int64_t bytes =
          cost.bytes >= 0 ? cost.bytes : saturatingAdd(totalBytes(f.inputs), totalBytes(outputs));
      const std::string& module = modules_[std::min(f.module, depth_)];
      const char* dtype = cost.dtype != nullptr ? cost.dtype : first != nullptr ? first->dtype : "";
      const size_t row =
          table_.add(f.name, module, dtype, f.entry->rowClass(priced), priced, bytes);
      closeEvent(f, OpEvent::Kind::Counted, static_cast<int64_t>(row));
    }
    // Only arithmetic covers a caller (rule 4): a copy inside an unknown op
    // (sort copies its input, then sorts) must not hide that op's work;
    // nor does an op reported for want of a price.
    covered = f.entry->opClass != OpClass::Memory && !cost.unpriced;
    f.coveredBytes = cost.unpriced ? 0 : saturatingAdd(totalBytes(f.inputs), totalBytes(outputs));
  } else if (f.inside) {
    closeEvent(f, OpEvent::Kind::Inside, -1);
  } else if (f.opaque) {
    closeEvent(f, OpEvent::Kind::Opaque, -1);
  } else if (f.entry == nullptr && !(f.covered && f.coveredBytes >= totalBytes(f.inputs))) {
    // Rule 4: its callees did no arithmetic, or read less than its inputs (a bias add inside
    // oneDNN's LSTM layer does not account for the layer).
    table_.addUnknown(f.name);
    closeEvent(f, OpEvent::Kind::Unknown, -1);
    covered = false;
  } else {
    closeEvent(f, OpEvent::Kind::Transparent, -1);
  }
  if (parent != nullptr) {
    parent->covered = parent->covered || covered;
    if (covered || f.counted) {
      parent->coveredBytes = saturatingAdd(parent->coveredBytes, f.coveredBytes);
    }
  }
}

void CountSession::closeEvent(const Frame& f, OpEvent::Kind kind, int64_t row) {
  if (f.event < 0) {
    return;
  }
  OpEvent& e = events_[static_cast<size_t>(f.event)];
  e.endNs = clock_();
  e.kind = kind;
  e.row = row;
}

void CountSession::recordEvents(uint64_t (*clock)()) {
  clock_ = clock;
}

int64_t CountSession::currentEvent() const {
  return frames_.empty() ? -1 : frames_.back().event;
}

int64_t CountSession::attributionEvent() const {
  if (frames_.empty()) {
    return -1;
  }
  const Frame& f = frames_.back();
  // An inside frame's event was given the counted frame's event as its owner when it began.
  return f.inside && counted_ >= 0 ? frames_[static_cast<size_t>(counted_)].event : f.event;
}

std::vector<OpEvent> CountSession::events() const {
  std::vector<OpEvent> out = events_;
  for (OpEvent& e : out) {
    // Follow owners (an inside op -> its counted op; a superseded op -> its re-dispatch).
    int64_t at = e.owner;
    for (size_t hops = 0; e.row < 0 && at >= 0 && hops < out.size(); ++hops) {
      const OpEvent& o = events_[static_cast<size_t>(at)];
      if (o.row >= 0) {
        e.row = o.row;
      } else if (o.owner == at) {
        break;
      }
      at = o.owner;
    }
  }
  return out;
}

void CountSession::enterModule(std::string_view path) {
  if (++depth_ == modules_.size()) {
    modules_.emplace_back(path);
  } else {
    modules_[depth_].assign(path);
  }
}

void CountSession::exitModule() {
  if (depth_ > 0) {
    --depth_;
  }
}

const std::string& CountSession::currentModule() const {
  return modules_[depth_];
}

}  // namespace torchutil
