#include "core/KernelTrace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

namespace torchutil {

const char* kernelKindName(KernelRecord::Kind k) {
  switch (k) {
    case KernelRecord::Kind::Kernel: return "kernel";
    case KernelRecord::Kind::Memcpy: return "memcpy";
    case KernelRecord::Kind::Memset: return "memset";
  }
  return "?";
}

uint64_t unionLength(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  uint64_t total = 0;
  bool open = false;
  Interval cur;
  for (const Interval& i : v) {
    if (i.end <= i.start) {
      continue;
    }
    if (!open) {
      cur = i;
      open = true;
    } else if (i.start <= cur.end) {
      cur.end = std::max(cur.end, i.end);
    } else {
      total += cur.end - cur.start;
      cur = i;
    }
  }
  if (open) {
    total += cur.end - cur.start;
  }
  return total;
}

void attributeCounted(std::vector<KernelRecord>& kernels,
                      const std::unordered_map<uint32_t, uint64_t>& externalIdOf) {
  for (KernelRecord& k : kernels) {
    k.timed = false;
    auto it = externalIdOf.find(k.correlationId);
    k.opEvent =
        it != externalIdOf.end() && it->second > 0 ? static_cast<int64_t>(it->second) - 1 : -1;
  }
}

std::unordered_map<uint32_t, uint64_t> correlateByMarkers(std::vector<KernelRecord>& records,
                                                          MarkerStream markers,
                                                          const std::vector<uint64_t>& markerIds,
                                                          std::string* problem) {
  const auto isMarker = [&](const KernelRecord& r) {
    return r.kind == KernelRecord::Kind::Memset && r.device == markers.device &&
           r.stream == markers.stream;
  };
  std::vector<uint32_t> issued;  // the markers' correlation ids
  for (const KernelRecord& r : records) {
    if (isMarker(r)) {
      issued.push_back(r.correlationId);
    }
  }
  records.erase(std::remove_if(records.begin(), records.end(), isMarker), records.end());
  if (issued.size() != markerIds.size()) {
    *problem = "the trace holds " + std::to_string(issued.size()) + " of the " +
               std::to_string(markerIds.size()) + " op markers issued";
    return {};
  }
  // One stream runs its memsets in the order they were issued; sorted anyway, since the
  // correlation ids are what orders them against the launches.
  std::sort(issued.begin(), issued.end());
  std::unordered_map<uint32_t, uint64_t> externalIdOf;
  for (const KernelRecord& r : records) {
    const auto after = std::upper_bound(issued.begin(), issued.end(), r.correlationId);
    if (after == issued.begin()) {
      continue;
    }
    const uint64_t id = markerIds[static_cast<size_t>(after - issued.begin()) - 1];
    if (id > 0) {
      externalIdOf[r.correlationId] = id;
    }
  }
  return externalIdOf;
}

bool attributeByGraphNodes(std::vector<KernelRecord>& timed, const GraphNodeOps& nodes,
                           int64_t forwards, std::string* problem) {
  const auto refuse = [&](std::string why) {
    for (KernelRecord& k : timed) {
      k.opEvent = -1;
      k.forward.reset();
    }
    *problem = std::move(why);
    return false;
  };
  std::map<uint32_t, size_t> perLaunch;  // correlation id -> records; ordered: launch order
  for (const KernelRecord& k : timed) {
    ++perLaunch[k.correlationId];
  }
  if (forwards <= 0 || perLaunch.size() != static_cast<size_t>(forwards)) {
    return refuse("the trace holds " + std::to_string(perLaunch.size()) + " graph launches, not " +
                  std::to_string(forwards));
  }
  for (const auto& [launch, n] : perLaunch) {
    if (n != perLaunch.begin()->second) {
      return refuse("graph launches of " + std::to_string(perLaunch.begin()->second) + " and " +
                    std::to_string(n) + " records");
    }
  }
  std::unordered_map<uint32_t, int32_t> forwardOf;
  for (const auto& [launch, n] : perLaunch) {
    forwardOf.emplace(launch, static_cast<int32_t>(forwardOf.size()));
  }
  size_t unknown = 0;
  for (KernelRecord& k : timed) {
    const auto clone = nodes.cloned.find(k.graphNodeId);
    const uint64_t node = clone != nodes.cloned.end() ? clone->second : k.graphNodeId;
    const auto op = nodes.created.find(node);
    if (k.graphNodeId == 0 || op == nodes.created.end()) {
      ++unknown;
      continue;
    }
    k.opEvent = op->second > 0 ? static_cast<int64_t>(op->second) - 1 : -1;
    k.forward = forwardOf.at(k.correlationId);
  }
  if (unknown > 0) {
    return refuse(std::to_string(unknown) + " of " + std::to_string(timed.size()) +
                  " records name no graph node the capture created");
  }
  return true;
}

namespace {

bool byStart(const KernelRecord& a, const KernelRecord& b) {
  return a.startNs != b.startNs ? a.startNs < b.startNs : a.correlationId < b.correlationId;
}

}  // namespace

std::vector<KernelRecord> capturedSequence(const CapturedForward& forward) {
  std::vector<KernelRecord> out;
  size_t change = 0;
  uint64_t op = 0;
  for (size_t i = 0; i < forward.nodes.size(); ++i) {
    while (change < forward.opChanges.size() && forward.opChanges[change].first <= i) {
      op = forward.opChanges[change++].second;
    }
    const CapturedNode& node = forward.nodes[i];
    if (!node.runs) {
      continue;
    }
    KernelRecord r;
    r.kind = node.kind;
    r.name = node.name;
    r.startNs = out.size();
    r.endNs = r.startNs;
    r.opEvent = op > 0 ? static_cast<int64_t>(op) - 1 : -1;
    out.push_back(std::move(r));
  }
  return out;
}

bool attributeByPosition(const std::vector<KernelRecord>& counted, std::vector<KernelRecord>& timed,
                         int64_t forwards) {
  if (forwards <= 0 || counted.empty() ||
      timed.size() != counted.size() * static_cast<size_t>(forwards)) {
    return false;
  }
  std::vector<KernelRecord> reference = counted;
  std::sort(reference.begin(), reference.end(), byStart);
  std::sort(timed.begin(), timed.end(), byStart);
  const size_t n = reference.size();
  for (size_t i = 0; i < timed.size(); ++i) {
    const KernelRecord& ref = reference[i % n];
    if ((!ref.name.empty() && timed[i].name != ref.name) || timed[i].kind != ref.kind) {
      return false;
    }
  }
  for (size_t i = 0; i < timed.size(); ++i) {
    timed[i].opEvent = reference[i % n].opEvent;
    timed[i].forward = static_cast<int32_t>(i / n);
  }
  return true;
}

TraceStats summarizeTrace(const std::vector<KernelRecord>& counted,
                          const std::vector<KernelRecord>& timed, int64_t forwards,
                          bool positionAttributed, const std::vector<OpEvent>& events,
                          size_t numRows) {
  TraceStats s;
  s.perRow.assign(numRows, OpKernelStats{});
  const bool useTimed = !timed.empty() && forwards > 0;
  const std::vector<KernelRecord>& source = useTimed ? timed : counted;
  const double perForward = useTimed ? 1.0 / static_cast<double>(forwards) : 1.0;
  std::vector<Interval> intervals;
  intervals.reserve(source.size());
  uint64_t kernelNs = 0;
  for (const KernelRecord& k : source) {
    kernelNs += k.durationNs();
    intervals.push_back({k.startNs, k.endNs});
  }
  s.kernelsPerForward = static_cast<double>(source.size()) * perForward;
  s.kernelSeconds = static_cast<double>(kernelNs) * 1e-9 * perForward;
  s.busySeconds = static_cast<double>(unionLength(std::move(intervals))) * 1e-9 * perForward;

  // Per op: from whichever set carries attribution.
  s.perOpFromTimed = useTimed && positionAttributed;
  const std::vector<KernelRecord>& attributed = s.perOpFromTimed ? timed : counted;
  const double scale = s.perOpFromTimed ? perForward : 1.0;
  for (const KernelRecord& k : attributed) {
    int64_t row = -1;
    if (k.opEvent >= 0 && static_cast<size_t>(k.opEvent) < events.size()) {
      row = events[static_cast<size_t>(k.opEvent)].row;
    }
    const double sec = static_cast<double>(k.durationNs()) * 1e-9 * scale;
    if (row >= 0 && static_cast<size_t>(row) < numRows) {
      s.perRow[static_cast<size_t>(row)].kernels += scale;
      s.perRow[static_cast<size_t>(row)].seconds += sec;
    } else {
      s.unattributedSeconds += sec;
    }
  }
  return s;
}

std::string jsonEscape(const std::string& in) {
  std::string out;
  out.reserve(in.size() + 2);
  for (unsigned char c : in) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

namespace {

std::string str(const std::string& s) {
  return "\"" + jsonEscape(s) + "\"";
}

std::string micros(uint64_t ns, uint64_t origin) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << (ns >= origin ? static_cast<double>(ns - origin) : 0.0) / 1e3;
  return o.str();
}

}  // namespace

std::string chromeTrace(const std::vector<OpEvent>& events, const std::vector<OpStats>& rows,
                        const std::vector<KernelRecord>& kernels, const std::string& deviceName,
                        const std::vector<CounterTrack>& counters) {
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (const OpEvent& e : events) {
    origin = std::min(origin, e.startNs);
  }
  for (const KernelRecord& k : kernels) {
    origin = std::min(origin, k.startNs);
  }
  if (origin == std::numeric_limits<uint64_t>::max()) {
    origin = 0;
  }
  std::ostringstream o;
  o << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) {
      o << ",\n";
    }
    first = false;
  };
  sep();
  o << R"({"ph":"M","pid":0,"name":"process_name","args":{"name":"CPU: ops of the counted forward"}})";
  if (!kernels.empty() || !counters.empty()) {  // a CPU profile's trace has its ops only
    sep();
    o << R"({"ph":"M","pid":1,"name":"process_name","args":{"name":)" << str("GPU: " + deviceName)
      << "}}";
  }
  // Ops: the counted ones and the ones without a formula; their implementation details
  // (inside) and wrappers (transparent) would only clutter the track.
  for (const OpEvent& e : events) {
    if (e.kind != OpEvent::Kind::Counted && e.kind != OpEvent::Kind::Unknown) {
      continue;
    }
    sep();
    o << R"({"ph":"X","pid":0,"tid":0,"cat":"op","name":)" << str(e.op)
      << ",\"ts\":" << micros(e.startNs, origin) << ",\"dur\":" << micros(e.endNs, e.startNs)
      << ",\"args\":{\"module\":" << str(e.module)
      << ",\"accounting\":" << str(opEventKindName(e.kind));
    if (e.row >= 0 && static_cast<size_t>(e.row) < rows.size()) {
      const OpStats& r = rows[static_cast<size_t>(e.row)];
      const double calls = static_cast<double>(std::max<int64_t>(r.calls, 1));
      o << ",\"flops_per_call\":" << static_cast<double>(r.flops()) / calls
        << ",\"matrix_flops_per_call\":" << static_cast<double>(r.matrixFlops) / calls
        << ",\"bytes_per_call\":" << static_cast<double>(r.bytes) / calls
        << ",\"dtype\":" << str(r.dtype) << ",\"class\":" << str(opClassName(r.opClass));
    }
    o << "}}";
  }
  for (const KernelRecord& k : kernels) {
    sep();
    std::string op, module;
    if (k.opEvent >= 0 && static_cast<size_t>(k.opEvent) < events.size()) {
      const OpEvent& e = events[static_cast<size_t>(k.opEvent)];
      // The op that accounts for the kernel: the counted owner when there is one.
      if (e.owner >= 0 && static_cast<size_t>(e.owner) < events.size()) {
        op = events[static_cast<size_t>(e.owner)].op;
        module = events[static_cast<size_t>(e.owner)].module;
      } else {
        op = e.op;
        module = e.module;
      }
    }
    o << R"({"ph":"X","pid":1,"tid":)" << k.stream << R"(,"cat":)" << str(kernelKindName(k.kind))
      << ",\"name\":" << str(k.name) << ",\"ts\":" << micros(k.startNs, origin)
      << ",\"dur\":" << micros(k.endNs, k.startNs) << ",\"args\":{\"op\":" << str(op)
      << ",\"module\":" << str(module) << ",\"forward\":"
      << (!k.timed                ? std::string("\"counted\"")
          : k.forward.has_value() ? std::to_string(*k.forward)
                                  : std::string("\"timed, not split by forward\""))
      << ",\"device\":" << k.device << ",\"correlation\":" << k.correlationId;
    if (k.kind == KernelRecord::Kind::Kernel) {
      o << ",\"grid\":[" << k.grid[0] << "," << k.grid[1] << "," << k.grid[2] << "],\"block\":["
        << k.block[0] << "," << k.block[1] << "," << k.block[2]
        << "],\"registers_per_thread\":" << k.registersPerThread
        << ",\"static_shared_bytes\":" << k.staticSharedBytes
        << ",\"dynamic_shared_bytes\":" << k.dynamicSharedBytes;
    } else {
      o << ",\"bytes\":" << k.bytes;
    }
    if (k.graphId != 0) {
      o << ",\"graph\":" << k.graphId;
    }
    o << "}}";
  }
  for (const CounterTrack& c : counters) {
    for (const auto& [ns, value] : c.points) {
      if (ns < origin || !std::isfinite(value)) {
        continue;
      }
      sep();
      o << R"({"ph":"C","pid":1,"cat":"counter","name":)" << str(c.name)
        << ",\"ts\":" << micros(ns, origin) << ",\"args\":{\"value\":" << value << "}}";
    }
  }
  o << "\n]}\n";
  return o.str();
}

void addKernelRows(ResultTable& table, const std::vector<KernelRecord>& kernels,
                   const std::vector<OpEvent>& events,
                   const std::vector<GeneratedKernelRow>& generated) {
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (const KernelRecord& k : kernels) {
    origin = std::min(origin, k.startNs);
  }
  const auto d = [](auto v) { return static_cast<double>(v); };
  for (const KernelRecord& k : kernels) {
    const size_t row = table.addRow();
    if (k.opEvent >= 0 && static_cast<size_t>(k.opEvent) < events.size()) {
      const OpEvent* e = &events[static_cast<size_t>(k.opEvent)];
      if (e->row >= 0) {
        table.set(row, KernelField::op_row, d(e->row));
      }
      if (e->owner >= 0 && static_cast<size_t>(e->owner) < events.size()) {
        e = &events[static_cast<size_t>(e->owner)];
      }
      table.setText(row, KernelField::op, e->op);
      table.setText(row, KernelField::module, e->module);
    }
    if (k.generated >= 0 && static_cast<size_t>(k.generated) < generated.size()) {
      const GeneratedKernelRow& g = generated[static_cast<size_t>(k.generated)];
      if (g.row >= 0) {
        table.set(row, KernelField::op_row, d(g.row));
      }
      table.setText(row, KernelField::op, g.ops);
      table.setText(row, KernelField::module, g.modules);
      table.set(row, KernelField::fused_flops, g.flops);
      table.set(row, KernelField::fused_bytes, g.bytes);
    }
    table.setText(row, KernelField::name, k.name);
    table.set(row, KernelField::timed, k.timed ? 1.0 : 0.0);
    if (k.forward.has_value()) {
      table.set(row, KernelField::forward, d(*k.forward));
    }
    table.set(row, KernelField::kind, d(static_cast<int>(k.kind)));
    table.set(row, KernelField::start_us, d(k.startNs - origin) / 1e3);
    table.set(row, KernelField::duration_us, d(k.durationNs()) / 1e3);
    table.set(row, KernelField::device, d(k.device));
    table.set(row, KernelField::stream, d(k.stream));
    table.set(row, KernelField::grid_x, d(k.grid[0]));
    table.set(row, KernelField::grid_y, d(k.grid[1]));
    table.set(row, KernelField::grid_z, d(k.grid[2]));
    table.set(row, KernelField::block_x, d(k.block[0]));
    table.set(row, KernelField::block_y, d(k.block[1]));
    table.set(row, KernelField::block_z, d(k.block[2]));
    table.set(row, KernelField::registers_per_thread, d(k.registersPerThread));
    table.set(row, KernelField::static_shared_bytes, d(k.staticSharedBytes));
    table.set(row, KernelField::dynamic_shared_bytes, d(k.dynamicSharedBytes));
    table.set(row, KernelField::bytes, d(k.bytes));
    table.set(row, KernelField::graph_id, d(k.graphId));
  }
}

}  // namespace torchutil
