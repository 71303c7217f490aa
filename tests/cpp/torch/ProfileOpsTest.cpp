// The util:: operators are registered when the torch layer is loaded.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/FormulaRegistry.h"
#include "core/ResultSchema.h"

namespace torchutil {
namespace {

c10::OperatorHandle utilOp(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

// Exactly these util:: ops are registered: a new op must be added here (and to the README).
TEST(ProfileOpsTest, RegistersExactlyTheUtilOps) {
  const std::set<std::string> expected{
      "util::profile",          "util::_profile",         "util::_count_begin",
      "util::_count_abandon",   "util::_count_end",       "util::_count_abort",
      "util::_counting",        "util::_live_callbacks",  "util::peak_flops",
      "util::utilization",      "util::_schema",          "util::_schema_tables",
      "util::result_fields",    "util::op_fields",        "util::kernel_fields",
      "util::formula_ops",      "util::roofline",         "util::_roofline_points",
      "util::_roofline_fields", "util::memory_bandwidth", "util::_counter_metrics"};
  std::set<std::string> registered;
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("util::", 0) == 0) {
      registered.insert(name.name);
    }
  }
  EXPECT_EQ(registered, expected);
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

}  // namespace
}  // namespace torchutil
