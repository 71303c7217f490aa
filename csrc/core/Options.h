#pragma once
// The options of a profile call and the environment switches, written once, torch-free (as
// kineto's Config: one table, one parse, one validation). Each row gives an option's name, type,
// default, range or choices, and what it is for; the rules between options and the environment
// switches are tables beside it. parseOptions reads a call's options into ProfileConfig, checked
// once: every other layer reads the config or the table, none checks the options again.
//
// Readers: the ops' schemas and their boxed kernels (csrc/ops/ProfileArgs), Python's signature,
// defaults, choices and type checks (torchutil/_ops.py, through _C._options_table()), the command
// line's flags (torchutil/studies/cli/args.py); tests/test_options_table.py checks them against
// this table and tests/cpp/OptionsTest.cpp checks the table itself.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/EnergyWindows.h"
#include "core/HwCounters.h"
#include "core/PeakTable.h"
#include "core/ProfilePlan.h"
#include "core/Repetition.h"

namespace torchutil {

enum class OptionKind : uint8_t { Int, Float, Bool, Str, Strs };

// A value of an option; monostate is None.
using OptionValue =
    std::variant<std::monostate, int64_t, double, bool, std::string, std::vector<std::string>>;

struct OptionRow {
  std::string name;
  OptionKind kind = OptionKind::Int;
  bool optional = false;  // None is a value (the schema's type ends in "?")
  OptionValue defaultValue;
  // Int and Float rows: the values taken, [low, high] with open ends where lowOpen/highOpen
  // (an infinite end is open; a Float is finite). Other rows: NaN.
  double low = 0.0;
  double high = 0.0;
  bool lowOpen = false;
  bool highOpen = false;
  std::vector<std::string> choices;  // Str and Strs rows that take names: the names
  std::string doc;                   // one line, for people
  bool summaryOp = true;             // an option of util::profile too (else of util::_profile only)

  std::string schemaType() const;      // "int", "float?", "str[]?"
  std::string defaultLiteral() const;  // the schema's default, also a Python literal: "2.0"
  // What the range takes, as messages say it: "an integer in [1, 10000000]", "a finite number
  // > 0", "a number in (0, 1)"; "" for rows without a range.
  std::string rangeText() const;
  bool hasRange() const;
};

// The options, in the order of the ops' schemas.
const std::vector<OptionRow>& optionsTable();
// The row of `name`; std::logic_error for a name the table lacks (a caller's bug).
const OptionRow& optionRow(std::string_view name);

// A rule between options: which, and what it says; parseOptions enforces each.
struct OptionRule {
  const char* options;
  const char* rule;
};
const std::vector<OptionRule>& optionRules();

// std::invalid_argument "torchutil: <name> must be <rangeText>, got <value>" unless `value` is
// in the row's range: the one message of each range, whoever checks it.
void checkRange(std::string_view name, double value);
// The rule max_iters >= iters: std::invalid_argument "torchutil: max_iters must be >= iters
// (<iters>), got <maxIters>".
void checkMaxIters(int64_t iters, int64_t maxIters);

// The environment switches: measurement and diagnostic switches of benchmarks and tests, read
// together, once per call (readEnvSwitches), never by the code they steer.
struct EnvSwitchRow {
  const char* name;
  const char* values;  // what it takes, and what unset means
  const char* doc;
};
const std::vector<EnvSwitchRow>& envSwitchTable();

struct EnvSwitches {
  // TORCHUTIL_CUPTI_CORRELATION (core/ProfilePlan.h: CorrelationSwitch).
  CorrelationSwitch correlation = CorrelationSwitch::Capture;
  bool cuptiTeardown = false;      // TORCHUTIL_CUPTI_TEARDOWN=1
  bool recordCapture = false;      // TORCHUTIL_CUPTI_RECORD_CAPTURE=1
  bool keepCapturePools = true;    // TORCHUTIL_KEEP_CAPTURE_POOL (=0: off)
  int64_t idleBeforeTimingUs = 0;  // TORCHUTIL_IDLE_BEFORE_TIMING_US
};

// The switches from `getenv` (the variable's value, or null when unset): the one place they are
// parsed. A value a switch does not take is what envSwitchTable() says it means.
using GetEnv = std::function<const char*(const char*)>;
EnvSwitches readEnvSwitches(const GetEnv& getenv);

// The options of one call, parsed and checked. Its defaults are the table's
// (OptionsTest.DefaultConfigIsTheTables).
struct ProfileConfig {
  // Forwards before the timed ones, the counted one among them.
  int64_t warmup = 3;
  // The timed forwards: iters (minIters), and with a target interval, up to maxIters or the
  // time budget (max_time).
  RepeatPolicy repeat;
  // nullopt (the default): Auto on CUDA (CUDA-graph replays where the forward captures), eager
  // elsewhere. An explicit Auto that times eagerly says why in timing_note.
  std::optional<TimingMode> timing;
  RateSource peak = RateSource::Auto;
  std::optional<double> peakFlops;
  // The batch the figures are per; nullopt: the first input's first dimension (which must then
  // be unambiguous: a tensor of two or more dimensions).
  std::optional<int64_t> batchSize;
  bool trace = true;  // record GPU kernels with CUPTI (CUDA only)
  // Forwards traced after the counted one (untimed; the timed forwards run without CUPTI).
  int64_t traceForwards = 1;
  bool chromeTrace = false;  // also build the Chrome trace JSON
  // Name the module of every op during the counted forward (an eager module's forwards wrapped,
  // other roots' global module hooks: csrc/python; about 0.4 ms a resnet50 forward on an H200
  // host, benchmarks/module_path_cost.py), which the summary-only op goes without.
  bool modulePaths = true;
  // Hardware counters (counters=...; none by default): range-profiler passes after the timed
  // forwards (flops, throughput) and PM sampling over the traced forwards, else over forwards
  // after the timed ones (timeline).
  std::vector<hw::CounterSet> counters;
  uint64_t pmIntervalNs = 10000;
  hw::Replay counterReplay = hw::Replay::User;  // how the range profiler gets its passes
  // A lock file that every phase running work on the GPU holds (flock), so that processes, or
  // threads of one, sharing one GPU time their forwards one at a time; the host-only capture of
  // an untraced graph profile runs without it, in thread-local capture mode.
  std::optional<std::string> gpuLock;
  // Energy per forward (energy=True): windows of the forwards as they were timed (graph replays
  // or eager), run after the timed ones and aligned to the counter's updates, energy_window
  // seconds in all (libtorch/EnergyReading.h).
  bool energy = false;
  EnergyPlan energyPlan;
  EnvSwitches env;
};

// The options given by name (absent: the row's default); None is std::monostate.
using GivenOptions = std::map<std::string, OptionValue, std::less<>>;

// The config of a call of util::_profile (summaryOp: util::profile, which records no module
// paths and builds no Chrome trace, its summary having no per-op rows). Checks each value
// against its row (std::invalid_argument naming the option and the value) and the rules; a name
// or a type the table lacks is std::logic_error (the ops' schemas and Python check both first).
ProfileConfig parseOptions(const GivenOptions& given, bool summaryOp, const EnvSwitches& env = {});

}  // namespace torchutil
