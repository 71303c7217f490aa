#include "core/Options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/NotANumber.h"

namespace torchutil {
// Named, not anonymous: the core is one translation unit of the unity build.
namespace options_table {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

template <typename E>
std::vector<std::string> namesOf(const EnumNames<E>& names) {
  std::vector<std::string> out;
  for (const auto& [value, name] : names.entries()) {
    out.emplace_back(name);
  }
  return out;
}

struct RowSpec {
  const char* name;
  OptionKind kind;
  bool optional;
  OptionValue defaultValue;
  const char* doc;
  bool summaryOp = true;
};

OptionRow makeRow(RowSpec spec) {
  OptionRow r;
  r.name = spec.name;
  r.kind = spec.kind;
  r.optional = spec.optional;
  r.defaultValue = std::move(spec.defaultValue);
  r.doc = spec.doc;
  r.summaryOp = spec.summaryOp;
  r.low = r.high = kNaN;
  return r;
}

// A row whose values lie in [low, high] (open ends as marked).
OptionRow ranged(RowSpec spec, double low, bool lowOpen, double high, bool highOpen) {
  OptionRow r = makeRow(std::move(spec));
  r.low = low;
  r.lowOpen = lowOpen;
  r.high = high;
  r.highOpen = highOpen || std::isinf(high);
  return r;
}

OptionRow named(RowSpec spec, std::vector<std::string> choices) {
  OptionRow r = makeRow(std::move(spec));
  r.choices = std::move(choices);
  return r;
}

std::vector<OptionRow> buildTable() {
  const double most = static_cast<double>(kMaxIters);
  const double int64Max = static_cast<double>(std::numeric_limits<int64_t>::max());
  std::vector<std::string> counterSets = namesOf(hw::kCounterSets);
  counterSets.emplace_back("all");
  using K = OptionKind;
  return {
      ranged({"warmup", K::Int, false, int64_t{3},
              "forwards before the timed ones; the counted forward is one of them"},
             0, false, most, false),
      ranged({"iters", K::Int, false, int64_t{10},
              "timed forwards; with target_ci, the least number timed"},
             1, false, most, false),
      named({"timing", K::Str, true, std::monostate{},
             "how the timed forwards run; None: auto on CUDA, eager elsewhere"},
            namesOf(kTimingModes)),
      makeRow({"cuda_graph", K::Bool, false, false, "same as timing='cuda_graph'"}),
      ranged({"target_ci", K::Float, true, std::monostate{},
              "time until the median's 95 % interval is within +-this fraction (0.005: "
              "+-0.5 %); None times exactly iters forwards"},
             0, true, 1, true),
      ranged({"max_time", K::Float, false, 2.0,
              "seconds of timing at most, with target_ci (its time budget)"},
             0, true, kInfinity, true),
      ranged({"max_iters", K::Int, true, std::monostate{},
              "timed forwards at most, with target_ci (None: 100000, or iters if more)"},
             1, false, most, false),
      named({"peak", K::Str, false, std::string("auto"), "where the peak FLOP/s comes from"},
            namesOf(kRateSources)),
      ranged({"peak_flops", K::Float, true, std::monostate{}, "the peak FLOP/s, overriding peak"},
             0, true, kInfinity, true),
      ranged({"batch_size", K::Int, true, std::monostate{},
              "the inputs one forward holds; None: the first input's first dimension"},
             1, false, int64Max, false),
      makeRow({"trace", K::Bool, false, true,
               "record the kernels with CUPTI on CUDA; time each op call on a CPU"}),
      ranged({"trace_forwards", K::Int, false, int64_t{1}, "forwards traced after the counted one"},
             0, false, most, false),
      named({"counters", K::Strs, true, std::monostate{},
             "the GPU's hardware counter sets to read (CUDA, CUPTI)"},
            counterSets),
      named({"counter_replay", K::Str, false, std::string("user"),
             "how the range profiler gets its passes: one forward a pass, or kernel replay"},
            namesOf(hw::kReplays)),
      makeRow({"gpu_lock", K::Str, true, std::monostate{},
               "a lock file held by every phase that runs work on the GPU"}),
      makeRow({"energy", K::Bool, false, false, "also measure joules per forward (NVML, RAPL)"}),
      ranged({"energy_window", K::Float, false, 1.0,
              "seconds of forwards the energy windows span together"},
             0, true, 3600, false),
      ranged({"energy_windows", K::Int, false, int64_t{5},
              "how many windows energy_window is split into; the interval comes from their "
              "spread"},
             1, false, static_cast<double>(kMostEnergyWindows), false),
      makeRow({"chrome_trace", K::Bool, false, false, "also build the Chrome (Perfetto) trace",
               /*summaryOp=*/false}),
      makeRow({"module_paths", K::Bool, false, true, "name each op's module on the counted forward",
               /*summaryOp=*/false}),
  };
}

// A number as Python and the schema write it: "2.0", "0.005", "1e+20", "inf".
std::string pythonFloat(double v) {
  if (std::isinf(v)) {
    return v > 0 ? "inf" : "-inf";
  }
  if (std::isnan(v)) {
    return "nan";
  }
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round trip
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) {
    s += ".0";
  }
  return s;
}

// A bound as messages write it: "1", "0", "3600", "10000000".
std::string bound(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e18) {
    return std::to_string(static_cast<int64_t>(v));
  }
  return pythonFloat(v);
}

// A value as messages write it: integers whole, others to three digits, as the result's texts.
std::string shown(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e18) {
    return std::to_string(static_cast<int64_t>(v));
  }
  return threeDigits(v);
}

const char* kindName(OptionKind k) {
  switch (k) {
    case OptionKind::Int: return "int";
    case OptionKind::Float: return "float";
    case OptionKind::Bool: return "bool";
    case OptionKind::Str: return "str";
    case OptionKind::Strs: return "str[]";
  }
  return "?";
}

template <typename T>
const T& as(const OptionRow& row, const OptionValue& v) {
  if (const T* t = std::get_if<T>(&v)) {
    return *t;
  }
  throw std::logic_error("torchutil: option " + row.name + " is a " + row.schemaType() +
                         ", got a value of another type");
}

}  // namespace options_table

std::string OptionRow::schemaType() const {
  return std::string(options_table::kindName(kind)) + (optional ? "?" : "");
}

std::string OptionRow::defaultLiteral() const {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return "None";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "True" : "False";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return options_table::pythonFloat(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return "\"" + v + "\"";
        } else {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) {
            s += (i ? ", \"" : "\"") + v[i] + "\"";
          }
          return s + "]";
        }
      },
      defaultValue);
}

bool OptionRow::hasRange() const {
  return (kind == OptionKind::Int || kind == OptionKind::Float) && !std::isnan(low);
}

std::string OptionRow::rangeText() const {
  if (!hasRange()) {
    return "";
  }
  const bool noUpperBound =
      std::isinf(high) ||
      (kind == OptionKind::Int && high >= static_cast<double>(std::numeric_limits<int64_t>::max()));
  if (noUpperBound) {
    return std::string(kind == OptionKind::Int ? "an integer " : "a finite number ") +
           (lowOpen ? "> " : ">= ") + options_table::bound(low);
  }
  return std::string(kind == OptionKind::Int ? "an integer in " : "a number in ") +
         (lowOpen ? "(" : "[") + options_table::bound(low) + ", " + options_table::bound(high) +
         (highOpen ? ")" : "]");
}

const std::vector<OptionRow>& optionsTable() {
  static const std::vector<OptionRow> table = options_table::buildTable();
  return table;
}

const OptionRow& optionRow(std::string_view name) {
  for (const OptionRow& r : optionsTable()) {
    if (r.name == name) {
      return r;
    }
  }
  throw std::logic_error("torchutil: the options table has no row " + std::string(name));
}

const std::vector<OptionRule>& optionRules() {
  static const std::vector<OptionRule> rules{
      {"cuda_graph, timing",
       "cuda_graph=True is timing='cuda_graph'; with timing given too, they "
       "must agree"},
      {"max_iters, target_ci",
       "max_iters applies with target_ci; without it exactly iters "
       "forwards are timed"},
      {"max_iters, iters", "max_iters >= iters"},
  };
  return rules;
}

void checkRange(std::string_view name, double value) {
  const OptionRow& r = optionRow(name);
  const bool aboveLow = r.lowOpen ? value > r.low : value >= r.low;
  const bool belowHigh = r.highOpen ? value < r.high : value <= r.high;
  if (!(aboveLow && belowHigh)) {  // NaN fails both
    throw std::invalid_argument("torchutil: " + r.name + " must be " + r.rangeText() + ", got " +
                                options_table::shown(value));
  }
}

void checkMaxIters(int64_t iters, int64_t maxIters) {
  if (maxIters < iters) {
    throw std::invalid_argument("torchutil: max_iters must be >= iters (" + std::to_string(iters) +
                                "), got " + std::to_string(maxIters));
  }
}

const std::vector<EnvSwitchRow>& envSwitchTable() {
  static const std::vector<EnvSwitchRow> rows{
      {"TORCHUTIL_CUPTI_CORRELATION",
       "unset, '' or 'capture' (the default); 'markers' (and any other value); 'api'; 'graph'; '0'",
       "how traced kernels are tied to their ops (core/ProfilePlan.h: CorrelationSwitch)"},
      {"TORCHUTIL_CUPTI_TEARDOWN", "'1': on; unset or anything else: off",
       "detach CUPTI from the process when a trace ends"},
      {"TORCHUTIL_CUPTI_RECORD_CAPTURE", "'1': on; unset or anything else: off",
       "capture-node traces record from the trace's start, through the capture"},
      {"TORCHUTIL_KEEP_CAPTURE_POOL", "'0': off; unset or anything else: on",
       "a thread's captures share one memory pool kept between calls"},
      {"TORCHUTIL_IDLE_BEFORE_TIMING_US",
       "a whole number of microseconds > 0; unset or anything else: 0",
       "the host sleeps this long before a batch of timed forwards on a device"},
  };
  return rows;
}

EnvSwitches readEnvSwitches(const GetEnv& getenv) {
  const auto is = [&](const char* name, std::string_view value) {
    const char* v = getenv(name);
    return v != nullptr && std::string_view(v) == value;
  };
  EnvSwitches s;
  s.correlation = parseCorrelationSwitch(getenv("TORCHUTIL_CUPTI_CORRELATION"));
  s.cuptiTeardown = is("TORCHUTIL_CUPTI_TEARDOWN", "1");
  s.recordCapture = is("TORCHUTIL_CUPTI_RECORD_CAPTURE", "1");
  s.keepCapturePools = !is("TORCHUTIL_KEEP_CAPTURE_POOL", "0");
  if (const char* v = getenv("TORCHUTIL_IDLE_BEFORE_TIMING_US")) {
    const std::string_view text(v);
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    const bool whole = ec == std::errc() && end == text.data() + text.size();
    s.idleBeforeTimingUs = whole && n > 0 ? n : 0;
  }
  return s;
}

ProfileConfig parseOptions(const GivenOptions& given, bool summaryOp, const EnvSwitches& env) {
  for (const auto& [name, value] : given) {
    optionRow(name);  // a name the table lacks is the caller's bug
  }
  const auto get = [&](const char* name) -> const OptionValue& {
    const auto it = given.find(name);
    return it != given.end() ? it->second : optionRow(name).defaultValue;
  };
  const auto isNone = [&](const char* name) {
    return std::holds_alternative<std::monostate>(get(name));
  };
  const auto integer = [&](const char* name) {
    const int64_t v = options_table::as<int64_t>(optionRow(name), get(name));
    checkRange(name, static_cast<double>(v));
    return v;
  };
  const auto number = [&](const char* name) {
    // An int is a number too (the schema takes 2 for a float).
    const OptionValue& v = get(name);
    const double d = std::holds_alternative<int64_t>(v)
                         ? static_cast<double>(std::get<int64_t>(v))
                         : options_table::as<double>(optionRow(name), v);
    checkRange(name, d);
    return d;
  };
  const auto flag = [&](const char* name) {
    return options_table::as<bool>(optionRow(name), get(name));
  };
  const auto text = [&](const char* name) -> const std::string& {
    return options_table::as<std::string>(optionRow(name), get(name));
  };

  ProfileConfig c;
  c.env = env;
  c.warmup = integer("warmup");
  c.trace = flag("trace");
  c.traceForwards = integer("trace_forwards");
  c.chromeTrace = !summaryOp && flag("chrome_trace");
  c.modulePaths = !summaryOp && flag("module_paths");

  // Rule: cuda_graph=True is timing="cuda_graph"; with timing given too, they must agree.
  const bool cudaGraph = flag("cuda_graph");
  if (!isNone("timing")) {
    c.timing = kTimingModes.parse(text("timing"), "timing");
  } else if (cudaGraph) {
    c.timing = TimingMode::CudaGraph;
  }
  if (cudaGraph && c.timing != TimingMode::CudaGraph) {
    throw std::invalid_argument("torchutil: cuda_graph=True contradicts timing='" + text("timing") +
                                "'; pass one of them");
  }

  const int64_t iters = integer("iters");
  const double maxTime = number("max_time");  // checked with or without target_ci
  const std::optional<int64_t> maxIters =
      isNone("max_iters") ? std::nullopt : std::optional<int64_t>(integer("max_iters"));
  c.repeat.minIters = iters;
  c.repeat.budgetSeconds = maxTime;
  if (!isNone("target_ci")) {
    c.repeat.targetRelativeCi = number("target_ci");
    c.repeat.maxIters = maxIters.value_or(std::max<int64_t>(iters, 100000));
    checkMaxIters(iters, c.repeat.maxIters);
  } else {
    // Rule: max_iters applies with target_ci.
    c.repeat.maxIters = maxIters.value_or(iters);
    if (c.repeat.maxIters != iters) {
      throw std::invalid_argument(
          "torchutil: max_iters applies with target_ci; without it exactly iters (" +
          std::to_string(iters) +
          ") forwards are timed, got max_iters=" + std::to_string(c.repeat.maxIters));
    }
  }

  c.peak = kRateSources.parse(text("peak"), "peak");
  if (!isNone("peak_flops")) {
    c.peakFlops = number("peak_flops");
  }
  if (!isNone("batch_size")) {
    c.batchSize = integer("batch_size");
  }
  if (!isNone("counters")) {
    c.counters = hw::parseCounterSets(
        options_table::as<std::vector<std::string>>(optionRow("counters"), get("counters")));
  }
  c.counterReplay = hw::parseReplay(text("counter_replay"));
  if (!isNone("gpu_lock")) {
    c.gpuLock = text("gpu_lock");
  }
  c.energy = flag("energy");
  c.energyPlan.windowSeconds = number("energy_window");
  c.energyPlan.windows = integer("energy_windows");
  return c;
}

}  // namespace torchutil
