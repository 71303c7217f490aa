#include "core/CompiledAttribution.h"

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

}  // namespace

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
    int basis = 0;
    double total = 0;
    for (; basis < 3 && total <= 0; ++basis) {
      total = 0;
      for (int64_t r : candidates) {
        total += weightOf(eagerRows[static_cast<size_t>(r)], basis);
      }
    }
    --basis;
    double best = -1;
    for (int64_t r : candidates) {
      const double share = weightOf(eagerRows[static_cast<size_t>(r)], basis) / total;
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

}  // namespace torchutil
