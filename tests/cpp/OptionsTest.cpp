// The options table (core/Options.h): every default inside its own range, every range and rule
// with its one message, every environment switch parsed.
#include "core/Options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace torchutil {
namespace {

std::string refusal(const GivenOptions& given, bool summaryOp = false) {
  try {
    parseOptions(given, summaryOp);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(OptionsTest, EveryDefaultIsAValueOfItsOwnRow) {
  for (const OptionRow& row : optionsTable()) {
    const OptionValue& d = row.defaultValue;
    if (std::holds_alternative<std::monostate>(d)) {
      EXPECT_TRUE(row.optional) << row.name << ": None is not a value of it";
      continue;
    }
    switch (row.kind) {
      case OptionKind::Int:
        ASSERT_TRUE(std::holds_alternative<int64_t>(d)) << row.name;
        EXPECT_NO_THROW(checkRange(row.name, static_cast<double>(std::get<int64_t>(d))))
            << row.name;
        break;
      case OptionKind::Float:
        ASSERT_TRUE(std::holds_alternative<double>(d)) << row.name;
        EXPECT_NO_THROW(checkRange(row.name, std::get<double>(d))) << row.name;
        break;
      case OptionKind::Bool: EXPECT_TRUE(std::holds_alternative<bool>(d)) << row.name; break;
      case OptionKind::Str:
        ASSERT_TRUE(std::holds_alternative<std::string>(d)) << row.name;
        if (!row.choices.empty()) {
          const std::string& s = std::get<std::string>(d);
          EXPECT_NE(std::find(row.choices.begin(), row.choices.end(), s), row.choices.end())
              << row.name << ": default '" << s << "' is not one of its choices";
        }
        break;
      case OptionKind::Strs:
        EXPECT_TRUE(std::holds_alternative<std::vector<std::string>>(d)) << row.name;
        break;
    }
    // Numbers have a range, and only numbers.
    EXPECT_EQ(row.hasRange(), row.kind == OptionKind::Int || row.kind == OptionKind::Float)
        << row.name;
    EXPECT_FALSE(row.doc.empty()) << row.name;
  }
}

TEST(OptionsTest, NamesAreUniqueAndTheSchemaTypesAndLiteralsAreThePythonOnes) {
  std::set<std::string> names;
  for (const OptionRow& row : optionsTable()) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name << " twice";
  }
  EXPECT_EQ(optionRow("warmup").schemaType(), "int");
  EXPECT_EQ(optionRow("warmup").defaultLiteral(), "3");
  EXPECT_EQ(optionRow("max_time").schemaType(), "float");
  EXPECT_EQ(optionRow("max_time").defaultLiteral(), "2.0");
  EXPECT_EQ(optionRow("energy_window").defaultLiteral(), "1.0");
  EXPECT_EQ(optionRow("target_ci").schemaType(), "float?");
  EXPECT_EQ(optionRow("target_ci").defaultLiteral(), "None");
  EXPECT_EQ(optionRow("counters").schemaType(), "str[]?");
  EXPECT_EQ(optionRow("peak").defaultLiteral(), "\"auto\"");
  EXPECT_EQ(optionRow("trace").defaultLiteral(), "True");
  EXPECT_FALSE(optionRow("module_paths").summaryOp);
  EXPECT_THROW(optionRow("bogus"), std::logic_error);
}

// The struct's own initializers are the table's defaults, so that a config built in C++ (the
// tests' fakes) runs what a call without options runs.
TEST(OptionsTest, DefaultConfigIsTheTables) {
  const ProfileConfig parsed = parseOptions({}, /*summaryOp=*/false);
  const ProfileConfig built;
  EXPECT_EQ(parsed.warmup, built.warmup);
  EXPECT_EQ(parsed.repeat.minIters, built.repeat.minIters);
  EXPECT_EQ(parsed.repeat.maxIters, built.repeat.maxIters);
  EXPECT_EQ(parsed.repeat.targetRelativeCi, built.repeat.targetRelativeCi);
  EXPECT_EQ(parsed.repeat.budgetSeconds, built.repeat.budgetSeconds);
  EXPECT_EQ(parsed.timing, built.timing);
  EXPECT_EQ(parsed.peak, built.peak);
  EXPECT_EQ(parsed.peakFlops, built.peakFlops);
  EXPECT_EQ(parsed.batchSize, built.batchSize);
  EXPECT_EQ(parsed.trace, built.trace);
  EXPECT_EQ(parsed.traceForwards, built.traceForwards);
  EXPECT_EQ(parsed.chromeTrace, built.chromeTrace);
  EXPECT_EQ(parsed.modulePaths, built.modulePaths);
  EXPECT_EQ(parsed.counters, built.counters);
  EXPECT_EQ(parsed.counterReplay, built.counterReplay);
  EXPECT_EQ(parsed.gpuLock, built.gpuLock);
  EXPECT_EQ(parsed.energy, built.energy);
  EXPECT_EQ(parsed.energyPlan.windowSeconds, built.energyPlan.windowSeconds);
  EXPECT_EQ(parsed.energyPlan.windows, built.energyPlan.windows);
  // And the figures themselves, as docs and Python state them.
  EXPECT_EQ(built.repeat.minIters, 10);
  EXPECT_EQ(built.repeat.budgetSeconds, 2.0);
  EXPECT_EQ(built.energyPlan.windowSeconds, 1.0);
  EXPECT_EQ(built.energyPlan.windows, 5);
}

TEST(OptionsTest, EveryRangeIsRefusedWithOneMessageNamingTheValue) {
  EXPECT_EQ(refusal({{"iters", int64_t{0}}}),
            "torchutil: iters must be an integer in [1, 10000000], got 0");
  EXPECT_EQ(refusal({{"iters", int64_t{1} << 40}}),
            "torchutil: iters must be an integer in [1, 10000000], got 1099511627776");
  EXPECT_EQ(refusal({{"warmup", int64_t{-1}}}),
            "torchutil: warmup must be an integer in [0, 10000000], got -1");
  EXPECT_EQ(refusal({{"trace_forwards", int64_t{-1}}}),
            "torchutil: trace_forwards must be an integer in [0, 10000000], got -1");
  EXPECT_EQ(refusal({{"batch_size", int64_t{0}}}),
            "torchutil: batch_size must be an integer >= 1, got 0");
  EXPECT_EQ(refusal({{"target_ci", 0.0}}),
            "torchutil: target_ci must be a number in (0, 1), got 0");
  EXPECT_EQ(refusal({{"target_ci", 2.0}}),
            "torchutil: target_ci must be a number in (0, 1), got 2");
  EXPECT_EQ(refusal({{"max_time", 0.0}}), "torchutil: max_time must be a finite number > 0, got 0");
  EXPECT_EQ(refusal({{"max_time", std::numeric_limits<double>::infinity()}}),
            "torchutil: max_time must be a finite number > 0, got inf");
  EXPECT_EQ(refusal({{"max_time", std::nan("")}}),
            "torchutil: max_time must be a finite number > 0, got nan");
  EXPECT_EQ(refusal({{"peak_flops", -1.0}}),
            "torchutil: peak_flops must be a finite number > 0, got -1");
  EXPECT_EQ(refusal({{"energy_window", 1e6}}),
            "torchutil: energy_window must be a number in (0, 3600], got 1000000");
  EXPECT_EQ(refusal({{"energy_windows", int64_t{101}}}),
            "torchutil: energy_windows must be an integer in [1, 100], got 101");
  EXPECT_EQ(refusal({{"target_ci", 0.01}, {"max_iters", int64_t{0}}}),
            "torchutil: max_iters must be an integer in [1, 10000000], got 0");
  // Every ranged row refuses just outside each finite end, in the same words.
  for (const OptionRow& row : optionsTable()) {
    if (!row.hasRange()) {
      continue;
    }
    const double step = row.kind == OptionKind::Int ? 1.0 : 0.5;
    for (const double bad :
         {row.lowOpen ? row.low : row.low - step, row.highOpen ? row.high : row.high + step}) {
      if (std::isinf(bad) || bad > 9e18) {
        continue;
      }
      try {
        checkRange(row.name, bad);
        ADD_FAILURE() << row.name << " took " << bad;
      } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()).rfind(
                      "torchutil: " + row.name + " must be " + row.rangeText() + ", got ", 0),
                  0u)
            << e.what();
      }
    }
  }
}

TEST(OptionsTest, EveryRuleBetweenOptions) {
  EXPECT_EQ(optionRules().size(), 3u);
  // cuda_graph and timing
  EXPECT_EQ(parseOptions({{"cuda_graph", true}}, false).timing, TimingMode::CudaGraph);
  EXPECT_EQ(
      parseOptions({{"cuda_graph", true}, {"timing", std::string("cuda_graph")}}, false).timing,
      TimingMode::CudaGraph);
  EXPECT_EQ(refusal({{"cuda_graph", true}, {"timing", std::string("eager")}}),
            "torchutil: cuda_graph=True contradicts timing='eager'; pass one of them");
  // max_iters only with target_ci
  EXPECT_EQ(refusal({{"iters", int64_t{5}}, {"max_iters", int64_t{8}}}),
            "torchutil: max_iters applies with target_ci; without it exactly iters (5) forwards "
            "are timed, got max_iters=8");
  const ProfileConfig fixed =
      parseOptions({{"iters", int64_t{5}}, {"max_iters", int64_t{5}}}, false);
  EXPECT_EQ(fixed.repeat.maxIters, 5);
  EXPECT_EQ(fixed.repeat.targetRelativeCi, 0.0);
  // max_iters >= iters
  EXPECT_EQ(refusal({{"target_ci", 0.01}, {"iters", int64_t{10}}, {"max_iters", int64_t{5}}}),
            "torchutil: max_iters must be >= iters (10), got 5");
  const ProfileConfig adaptive =
      parseOptions({{"target_ci", 0.01}, {"max_time", int64_t{3}}}, false);
  EXPECT_EQ(adaptive.repeat.targetRelativeCi, 0.01);
  EXPECT_EQ(adaptive.repeat.maxIters, 100000);
  EXPECT_EQ(adaptive.repeat.budgetSeconds, 3.0);  // an int is a number
}

TEST(OptionsTest, NamesAreTheChoicesOfTheirRows) {
  EXPECT_EQ(refusal({{"timing", std::string("graph")}}),
            "torchutil: timing must be 'eager', 'cuda_graph' or 'auto', got 'graph'");
  EXPECT_EQ(refusal({{"peak", std::string("bogus")}}),
            "torchutil: peak must be 'auto', 'datasheet', 'computed' or 'measured', got 'bogus'");
  EXPECT_NE(refusal({{"counter_replay", std::string("application")}}).find("'user' or 'kernel'"),
            std::string::npos);
  EXPECT_NE(refusal({{"counters", std::vector<std::string>{"bogus"}}})
                .find("unknown counter set 'bogus'"),
            std::string::npos);
  EXPECT_EQ(optionRow("timing").choices, (std::vector<std::string>{"eager", "cuda_graph", "auto"}));
  EXPECT_EQ(optionRow("counters").choices,
            (std::vector<std::string>{"flops", "throughput", "timeline", "all"}));
  const ProfileConfig c = parseOptions(
      {{"counters", std::vector<std::string>{"all"}}, {"peak", std::string("measured")}}, false);
  EXPECT_EQ(c.counters.size(), 3u);
  EXPECT_EQ(c.peak, RateSource::Measured);
}

TEST(OptionsTest, TheSummaryOpRecordsNoModulePathsOrChromeTrace) {
  const GivenOptions given{{"chrome_trace", true}, {"module_paths", true}};
  const ProfileConfig full = parseOptions(given, /*summaryOp=*/false);
  EXPECT_TRUE(full.chromeTrace && full.modulePaths);
  const ProfileConfig summary = parseOptions(given, /*summaryOp=*/true);
  EXPECT_FALSE(summary.chromeTrace || summary.modulePaths);
}

TEST(OptionsTest, UnknownNamesAndWrongTypesAreTheCallersBug) {
  EXPECT_THROW(parseOptions({{"bogus", int64_t{1}}}, false), std::logic_error);
  EXPECT_THROW(parseOptions({{"warmup", 2.5}}, false), std::logic_error);
  EXPECT_THROW(parseOptions({{"peak", int64_t{1}}}, false), std::logic_error);
}

TEST(OptionsTest, EveryEnvironmentSwitchIsParsedInOnePlace) {
  std::map<std::string, std::string> env;
  std::set<std::string> asked;
  const GetEnv getenv = [&](const char* name) -> const char* {
    asked.insert(name);
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EnvSwitches s = readEnvSwitches(getenv);
  // Unset: the defaults, which are EnvSwitches{}'s.
  EXPECT_EQ(s.correlation, CorrelationSwitch::Capture);
  EXPECT_FALSE(s.cuptiTeardown || s.recordCapture);
  EXPECT_TRUE(s.keepCapturePools);
  EXPECT_EQ(s.idleBeforeTimingUs, 0);
  // It asks for exactly the switches of the table.
  std::set<std::string> listed;
  for (const EnvSwitchRow& row : envSwitchTable()) {
    listed.insert(row.name);
  }
  EXPECT_EQ(asked, listed);

  const std::vector<std::pair<std::string, CorrelationSwitch>> correlations{
      {"", CorrelationSwitch::Capture},
      {"capture", CorrelationSwitch::Capture},
      {"markers", CorrelationSwitch::Markers},
      {"anything", CorrelationSwitch::Markers},
      {"api", CorrelationSwitch::Api},
      {"graph", CorrelationSwitch::Graph},
      {"0", CorrelationSwitch::Off}};
  for (const auto& [value, want] : correlations) {
    env["TORCHUTIL_CUPTI_CORRELATION"] = value;
    EXPECT_EQ(readEnvSwitches(getenv).correlation, want) << "'" << value << "'";
  }
  for (const char* name : {"TORCHUTIL_CUPTI_TEARDOWN", "TORCHUTIL_CUPTI_RECORD_CAPTURE"}) {
    for (const auto& [value, on] : std::vector<std::pair<std::string, bool>>{
             {"1", true}, {"0", false}, {"true", false}, {"", false}}) {
      env[name] = value;
      s = readEnvSwitches(getenv);
      EXPECT_EQ(std::string(name) == "TORCHUTIL_CUPTI_TEARDOWN" ? s.cuptiTeardown : s.recordCapture,
                on)
          << name << "=" << value;
    }
  }
  for (const auto& [value, keep] : std::vector<std::pair<std::string, bool>>{
           {"0", false}, {"1", true}, {"", true}, {"no", true}}) {
    env["TORCHUTIL_KEEP_CAPTURE_POOL"] = value;
    EXPECT_EQ(readEnvSwitches(getenv).keepCapturePools, keep) << value;
  }
  for (const auto& [value, us] : std::vector<std::pair<std::string, int64_t>>{
           {"250", 250}, {"0", 0}, {"-3", 0}, {"12x", 0}, {"", 0}, {"1.5", 0}}) {
    env["TORCHUTIL_IDLE_BEFORE_TIMING_US"] = value;
    EXPECT_EQ(readEnvSwitches(getenv).idleBeforeTimingUs, us) << "'" << value << "'";
  }
  // parseOptions keeps what it is given.
  env["TORCHUTIL_CUPTI_TEARDOWN"] = "1";
  EXPECT_TRUE(parseOptions({}, false, readEnvSwitches(getenv)).env.cuptiTeardown);
}

}  // namespace
}  // namespace torchutil
