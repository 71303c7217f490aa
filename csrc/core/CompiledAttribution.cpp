#include "core/CompiledAttribution.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace torchutil {
namespace {

// What a row weighs when a kernel's time is shared among rows of one op.
double weightOf(const OpStats& r, int basis) {
  switch (basis) {
    case 0: return static_cast<double>(r.flops());
    case 1: return static_cast<double>(r.bytes);
    default: return static_cast<double>(r.calls);
  }
}

// Shares `amount` among candidates by weightOf on the first basis that weighs anything (FLOPs,
// bytes, calls): (row, share) pairs.
std::vector<std::pair<int64_t, double>> shareAmong(const std::vector<int64_t>& candidates,
                                                   const std::vector<OpStats>& rows,
                                                   double amount) {
  double total = 0;
  int basis = 0;
  for (; basis < 3 && total <= 0; ++basis) {
    total = 0;
    for (int64_t r : candidates) {
      total += weightOf(rows[static_cast<size_t>(r)], basis);
    }
  }
  --basis;
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t r : candidates) {
    const double w = total > 0 ? weightOf(rows[static_cast<size_t>(r)], basis) / total
                               : 1.0 / static_cast<double>(candidates.size());
    out.emplace_back(r, amount * w);
  }
  return out;
}

bool pathEndsWith(const std::string& path, const std::string& tail) {
  return path.size() > tail.size() &&
         path.compare(path.size() - tail.size(), tail.size(), tail) == 0 &&
         path[path.size() - tail.size() - 1] == '.';
}

// The rows whose work ran an op of each name: their own, and those of ops inside them.
using RowsOfName = std::unordered_map<std::string, std::unordered_set<int64_t>>;

RowsOfName rowsOfName(const std::vector<OpStats>& rows, const std::vector<OpEvent>& events) {
  RowsOfName out;
  for (size_t i = 0; i < rows.size(); ++i) {
    out[rows[i].op].insert(static_cast<int64_t>(i));
  }
  for (const OpEvent& e : events) {
    if (e.row >= 0 && static_cast<size_t>(e.row) < rows.size()) {
      out[e.op].insert(e.row);
    }
  }
  return out;
}

std::vector<int64_t> matchRows(const FusedOp& op, const std::vector<OpStats>& rows,
                               const RowsOfName& names) {
  const auto named = [&](int64_t r) {
    for (const std::string& n : op.ops) {
      auto it = names.find(n);
      if (it != names.end() && it->second.count(r) > 0) {
        return true;
      }
    }
    return false;
  };
  const auto below = [&](int64_t r) {
    return !op.module.empty() && pathEndsWith(rows[static_cast<size_t>(r)].module, op.module);
  };
  const auto same = [&](int64_t r) { return rows[static_cast<size_t>(r)].module == op.module; };
  const std::function<bool(int64_t)> tiers[] = {
      [&](int64_t r) { return named(r) && same(r); },
      [&](int64_t r) { return named(r) && below(r); },
      [&](int64_t r) { return !op.module.empty() && (same(r) || below(r)); },
      named,
  };
  for (const auto& matches : tiers) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (matches(static_cast<int64_t>(i))) {
        out.push_back(static_cast<int64_t>(i));
      }
    }
    if (!out.empty()) {
      return out;
    }
  }
  return {};
}

std::string plusJoined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) {
    s += (s.empty() ? "" : " + ") + x;
  }
  return s;
}

void addOnce(std::vector<std::string>* v, const std::string& x) {
  if (!x.empty() && std::find(v->begin(), v->end(), x) == v->end()) {
    v->push_back(x);
  }
}

// A generated kernel's time by eager row (fractions summing to at most 1) and its table row.
struct KernelShares {
  std::vector<std::pair<int64_t, double>> rows;
  GeneratedKernelRow table;
};

KernelShares sharesOf(const GeneratedKernel& k, const std::vector<OpStats>& rows,
                      const RowsOfName& names) {
  KernelShares out;
  bool allPriced = true, matrix = false;
  double flops = 0, bytes = 0;
  for (const FusedOp& f : k.fused) {
    allPriced = allPriced && f.priced;
    matrix = matrix || f.matrixFlops > 0;
    flops += static_cast<double>(f.matrixFlops) + static_cast<double>(f.vectorFlops);
    bytes += static_cast<double>(f.bytes);
  }
  if (allPriced) {
    out.table.flops = flops;
    out.table.bytes = bytes;
  }
  // The kernel's ops: the pieces of an op Inductor decomposed (one op they came from, one
  // module) are one op, weighing what its heaviest piece weighs.
  struct Part {
    const FusedOp* op;
    double weight;
    bool priced;
  };
  std::vector<std::string> keys;
  std::unordered_map<std::string, Part> parts;
  for (const FusedOp& f : k.fused) {
    const double w = matrix
                         ? static_cast<double>(f.matrixFlops) + static_cast<double>(f.vectorFlops)
                         : static_cast<double>(f.bytes);
    const std::string key = (f.ops.size() > 1 ? f.ops[1] : f.node) + '\x1f' + f.module;
    auto [it, fresh] = parts.emplace(key, Part{&f, w, f.priced});
    if (fresh) {
      keys.push_back(key);
    } else {
      it->second.priced = it->second.priced && f.priced;
      if (w > it->second.weight) {
        it->second.op = &f;
        it->second.weight = w;
      }
    }
  }
  // Equal shares where an op has no price (among the unpriced and those of some weight: views
  // take none) or where none weighs anything.
  double total = 0;
  size_t sharing = 0;
  for (const auto& [key, part] : parts) {
    total += part.weight;
    sharing += !part.priced || part.weight > 0 ? 1 : 0;
  }
  const auto weightOfPart = [&](const Part& p) {
    if (!allPriced) {
      return !p.priced || p.weight > 0 ? 1.0 / static_cast<double>(sharing) : 0.0;
    }
    return total > 0 ? p.weight / total : 1.0 / static_cast<double>(parts.size());
  };
  std::unordered_map<int64_t, double> byRow;
  std::vector<std::string> opNames, modules;
  for (const std::string& key : keys) {
    const Part& part = parts.at(key);
    const double weight = weightOfPart(part);
    if (weight <= 0) {
      continue;  // views, and ops of no nominal work: no share
    }
    for (const auto& [r, share] : shareAmong(matchRows(*part.op, rows, names), rows, weight)) {
      byRow[r] += share;
    }
    addOnce(&opNames, part.op->ops.empty() ? part.op->node : part.op->ops.back());
    addOnce(&modules, part.op->module);
  }
  double best = -1;
  for (const auto& [r, share] : byRow) {
    out.rows.emplace_back(r, share);
    if (share > best || (share == best && r < out.table.row)) {
      best = share;
      out.table.row = r;
    }
  }
  out.table.ops = plusJoined(opNames);
  out.table.modules = plusJoined(modules);
  return out;
}

}  // namespace

std::vector<int64_t> rowsOfFusedOp(const FusedOp& op, const std::vector<OpStats>& rows,
                                   const std::vector<OpEvent>& events) {
  return matchRows(op, rows, rowsOfName(rows, events));
}

std::vector<GeneratedKernelRow> attributeGenerated(
    TraceStats* stats, std::vector<KernelRecord>& counted, std::vector<KernelRecord>& timed,
    int64_t forwards, const GeneratedKernels& generated, const std::vector<OpStats>& rows,
    const std::vector<OpEvent>& events, std::string* status) {
  const RowsOfName names = rowsOfName(rows, events);
  std::vector<GeneratedKernelRow> table;
  std::vector<std::vector<std::pair<int64_t, double>>> shares;
  std::unordered_map<std::string, int32_t> index;
  for (const GeneratedKernel& k : generated.kernels) {
    if (!k.refusal.empty() || index.count(k.name) > 0) {
      continue;
    }
    KernelShares s = sharesOf(k, rows, names);
    index.emplace(k.name, static_cast<int32_t>(table.size()));
    table.push_back(std::move(s.table));
    shares.push_back(std::move(s.rows));
  }
  for (std::vector<KernelRecord>* records : {&counted, &timed}) {
    for (KernelRecord& k : *records) {
      if (k.opEvent < 0) {
        auto it = index.find(k.name);
        k.generated = it != index.end() ? it->second : -1;
      }
    }
  }
  const bool fromTimed = stats->perOpFromTimed && forwards > 0;
  const double scale = fromTimed ? 1.0 / static_cast<double>(forwards) : 1.0;
  double unlaunched = 0, tied = 0;  // seconds per forward of kernels no op launched, and tied
  for (const KernelRecord& k : fromTimed ? timed : counted) {
    if (k.opEvent >= 0 || k.kind != KernelRecord::Kind::Kernel) {
      continue;
    }
    const double sec = static_cast<double>(k.durationNs()) * 1e-9 * scale;
    unlaunched += sec;
    if (k.generated < 0) {
      continue;
    }
    for (const auto& [r, share] : shares[static_cast<size_t>(k.generated)]) {
      if (r >= 0 && static_cast<size_t>(r) < stats->perRow.size()) {
        stats->perRow[static_cast<size_t>(r)].kernels += scale * share;
        stats->perRow[static_cast<size_t>(r)].seconds += sec * share;
        tied += sec * share;
      }
    }
  }
  stats->unattributedSeconds = std::max(0.0, stats->unattributedSeconds - tied);
  if (!generated.status.empty() || unlaunched > 0) {
    const double pct = unlaunched > 0 ? 100.0 * tied / unlaunched : 100.0;
    *status += "; " + generated.status + "; " + std::to_string(static_cast<int>(pct)) +
               " % of the time of kernels no op launched tied to the ops they fused";
  }
  return table;
}

TraceStats shareOntoEagerRows(const TraceStats& compiled, const std::vector<OpStats>& compiledRows,
                              const std::vector<OpStats>& eagerRows,
                              const std::vector<OpEvent>& eagerEvents,
                              std::vector<int64_t>* rowOf) {
  // op name -> the eager rows whose work ran it, in first-seen order
  std::unordered_map<std::string, std::vector<int64_t>> rowsOfOp;
  std::unordered_set<std::string> seen;
  for (const OpEvent& e : eagerEvents) {
    if (e.row < 0 || static_cast<size_t>(e.row) >= eagerRows.size()) {
      continue;
    }
    if (seen.insert(e.op + '\x1f' + std::to_string(e.row)).second) {
      rowsOfOp[e.op].push_back(e.row);
    }
  }
  TraceStats out = compiled;
  out.perRow.assign(eagerRows.size(), OpKernelStats{});
  rowOf->assign(compiledRows.size(), -1);
  for (size_t c = 0; c < compiledRows.size() && c < compiled.perRow.size(); ++c) {
    const OpKernelStats& k = compiled.perRow[c];
    if (k.seconds == 0 && k.kernels == 0) {
      continue;
    }
    std::vector<int64_t> candidates;
    if (auto it = rowsOfOp.find(compiledRows[c].op); it != rowsOfOp.end()) {
      for (int64_t r : it->second) {
        if (eagerRows[static_cast<size_t>(r)].dtype == compiledRows[c].dtype) {
          candidates.push_back(r);
        }
      }
      if (candidates.empty()) {
        candidates = it->second;  // autocast or Inductor ran it in another dtype
      }
    }
    if (candidates.empty()) {
      out.unattributedSeconds += k.seconds;
      continue;
    }
    double best = -1;
    for (const auto& [r, share] : shareAmong(candidates, eagerRows, 1.0)) {
      out.perRow[static_cast<size_t>(r)].kernels += k.kernels * share;
      out.perRow[static_cast<size_t>(r)].seconds += k.seconds * share;
      if (share > best) {
        best = share;
        (*rowOf)[c] = r;
      }
    }
  }
  return out;
}

std::vector<GeneratedKernelRow> tieCompiledTrace(
    TraceStats* stats, std::vector<OpEvent>& compiledEvents,
    const std::vector<OpStats>& compiledRows, const std::vector<OpStats>& eagerRows,
    const std::vector<OpEvent>& eagerEvents, std::vector<KernelRecord>& counted,
    std::vector<KernelRecord>& timed, int64_t forwards, const GeneratedKernels& generated,
    std::string* status) {
  std::vector<int64_t> rowOf;
  *stats = shareOntoEagerRows(*stats, compiledRows, eagerRows, eagerEvents, &rowOf);
  for (OpEvent& e : compiledEvents) {
    e.row = e.row >= 0 ? rowOf[static_cast<size_t>(e.row)] : -1;
  }
  for (std::vector<KernelRecord>* records : {&counted, &timed}) {
    for (KernelRecord& k : *records) {
      if (k.opEvent >= 0 && static_cast<size_t>(k.opEvent) < compiledEvents.size() &&
          compiledEvents[static_cast<size_t>(k.opEvent)].row < 0) {
        k.opEvent = -1;
      }
    }
  }
  return attributeGenerated(stats, counted, timed, forwards, generated, eagerRows, eagerEvents,
                            status);
}

}  // namespace torchutil
