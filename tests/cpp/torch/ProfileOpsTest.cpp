// The util:: operators are registered when the torch layer is loaded.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/FormulaRegistry.h"
#include "core/Options.h"
#include "core/ResultSchema.h"
#include "ops/ProfileArgs.h"

namespace torchutil {
namespace {

c10::OperatorHandle utilOp(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

// Exactly these util:: ops are registered: a new op must be added here (and to the README).
TEST(ProfileOpsTest, RegistersExactlyTheUtilOps) {
  const std::set<std::string> expected{"util::profile",          "util::_profile",
                                       "util::_count_begin",     "util::_count_abandon",
                                       "util::_count_end",       "util::_count_abort",
                                       "util::_counting",        "util::_live_callbacks",
                                       "util::peak_flops",       "util::utilization",
                                       "util::_schema",          "util::_schema_tables",
                                       "util::result_fields",    "util::op_fields",
                                       "util::kernel_fields",    "util::formula_ops",
                                       "util::roofline",         "util::_roofline_points",
                                       "util::_roofline_fields", "util::memory_bandwidth",
                                       "util::_counter_metrics", "util::_check_peak_options"};
  std::set<std::string> registered;
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("util::", 0) == 0) {
      registered.insert(name.name);
    }
  }
  EXPECT_EQ(registered, expected);
}

// Profiler.__init__ asks this of its peak options, so that a bad one is refused before the
// block runs (_count_end makes the same checks after it).
TEST(ProfileOpsTest, ChecksPeakOptionsAsCountEndDoes) {
  const auto check =
      utilOp("util::_check_peak_options").typed<void(std::string, std::optional<double>)>();
  EXPECT_NO_THROW(check.call("auto", std::nullopt));
  EXPECT_NO_THROW(check.call("measured", 1e12));
  for (const auto& [peak, flops, says] :
       {std::tuple<std::string, std::optional<double>, std::string>{"bogus", std::nullopt,
                                                                    "got 'bogus'"},
        {"auto", -1.0, "peak_flops must be a finite number > 0, got -1"}}) {
    try {
      check.call(peak, flops);
      FAIL() << peak << " accepted";
    } catch (const c10::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST(ProfileOpsTest, FieldOpsReturnTheSchemaFieldNames) {
  using Names = std::vector<std::string>();
  EXPECT_EQ(utilOp("util::result_fields").typed<Names>().call(), fieldNames("summary"));
  EXPECT_EQ(utilOp("util::op_fields").typed<Names>().call(), numericFieldNames("ops"));
  EXPECT_EQ(utilOp("util::kernel_fields").typed<Names>().call(), numericFieldNames("kernels"));
  EXPECT_EQ(utilOp("util::_roofline_fields").typed<Names>().call(), numericFieldNames("roofline"));
  EXPECT_EQ(utilOp("util::_schema_tables").typed<Names>().call(), schemaNames());
  EXPECT_EQ(utilOp("util::formula_ops").typed<Names>().call(), FormulaRegistry::global().names());
}

TEST(ProfileOpsTest, UtilizationDividesFlopsBySecondsAndPeak) {
  const at::Tensor flops = at::full({2}, 6e12, at::kDouble);
  const at::Tensor seconds = at::full({2}, 0.5, at::kDouble);
  const at::Tensor peak = at::full({2}, 24e12, at::kDouble);
  const at::Tensor u =
      utilOp("util::utilization")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>()
          .call(flops, seconds, peak);
  EXPECT_DOUBLE_EQ(u[0].item<double>(), 0.5);
  EXPECT_THROW(utilOp("util::utilization")
                   .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>()
                   .call(flops.to(at::kLong), seconds, peak),
               c10::Error);
}

// Both ops' schemas come from the one options table: every row once, util::profile without the
// per-op options, and the Python literal defaults as the schema parses them.
TEST(ProfileOpsTest, BothProfileSchemasAreTheOptionsTable) {
  const auto& full = utilOp("util::_profile").schema().arguments();
  const auto& summary = utilOp("util::profile").schema().arguments();
  size_t fullRows = 0, summaryRows = 0;
  for (const OptionRow& o : optionsTable()) {
    const auto named = [&](const std::vector<c10::Argument>& args) {
      return std::count_if(args.begin(), args.end(), [&](const c10::Argument& a) {
        return a.name() == o.name && a.kwarg_only();
      });
    };
    EXPECT_EQ(named(full), 1) << o.name;
    EXPECT_EQ(named(summary), o.summaryOp ? 1 : 0) << o.name;
    ++fullRows;
    summaryRows += o.summaryOp ? 1 : 0;
  }
  EXPECT_EQ(full.size(), fullRows + 2);  // model, inputs
  EXPECT_EQ(summary.size(), summaryRows + 2);
}

TEST(ProfileOpsTest, OptionsAreParsedByNameAndBadValuesNamed) {
  OptionValues values;
  for (const OptionRow& o : optionsTable()) {
    values.emplace(o.name, c10::IValue());
  }
  values["warmup"] = 5;
  values["iters"] = 7;
  values["cuda_graph"] = false;
  values["max_time"] = 2.0;
  values["peak"] = std::string("auto");
  values["trace"] = true;
  values["trace_forwards"] = 1;
  values["counter_replay"] = std::string("user");
  values["chrome_trace"] = true;
  values["module_paths"] = true;
  values["batch_size"] = 3;
  values["energy"] = true;
  values["energy_window"] = 0.75;
  values["energy_windows"] = 3;
  ProfileOptions o = profileOptions(values, /*summaryOp=*/false);
  EXPECT_TRUE(o.energy);
  EXPECT_EQ(o.energyPlan.windowSeconds, 0.75);
  EXPECT_EQ(o.energyPlan.windows, 3);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_EQ(o.repeat.minIters, 7);
  EXPECT_EQ(o.repeat.maxIters, 7);
  EXPECT_EQ(o.batchSize, 3);
  EXPECT_FALSE(o.timing.has_value());
  EXPECT_TRUE(o.chromeTrace && o.modulePaths);
  // The summary op records no module paths and builds no Chrome trace.
  o = profileOptions(values, /*summaryOp=*/true);
  EXPECT_FALSE(o.chromeTrace || o.modulePaths);
  values["target_ci"] = 0.0;
  try {
    profileOptions(values, false);
    FAIL() << "target_ci=0 accepted";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("target_ci must be a number in (0, 1), got 0"),
              std::string::npos)
        << e.what();
  }
  values["target_ci"] = c10::IValue();
  values["timing"] = std::string("graph");
  EXPECT_THROW(profileOptions(values, false), c10::ValueError);
}

}  // namespace
}  // namespace torchutil
