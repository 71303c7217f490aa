// The util:: operators are registered when the torch layer is loaded.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/FormulaRegistry.h"
#include "core/Metrics.h"

namespace torchutil {
namespace {

c10::OperatorHandle utilOp(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

TEST(ProfileOpsTest, RegistersEveryUtilOp) {
  for (const char* name :
       {"util::profile", "util::_profile", "util::_count_begin", "util::_count_end",
        "util::_count_abort", "util::_counting", "util::_live_callbacks", "util::peak_flops",
        "util::utilization", "util::result_fields", "util::op_fields", "util::formula_ops"}) {
    EXPECT_TRUE(c10::Dispatcher::singleton().findSchema({name, ""}).has_value()) << name;
  }
}

TEST(ProfileOpsTest, FieldOpsReturnTheCoreFieldNames) {
  using Names = std::vector<std::string>();
  EXPECT_EQ(utilOp("util::result_fields").typed<Names>().call(), fieldNames());
  EXPECT_EQ(utilOp("util::op_fields").typed<Names>().call(), opFieldNames());
  EXPECT_EQ(utilOp("util::formula_ops").typed<Names>().call(), FormulaRegistry::global().names());
}

TEST(ProfileOpsTest, UtilizationDividesFlopsBySecondsAndPeak) {
  const at::Tensor flops = at::full({2}, 6e12, at::kDouble);
  const at::Tensor seconds = at::full({2}, 0.5, at::kDouble);
  const at::Tensor peak = at::full({2}, 24e12, at::kDouble);
  const at::Tensor u = utilOp("util::utilization")
                           .typed<at::Tensor(const at::Tensor&, const at::Tensor&,
                                             const at::Tensor&)>()
                           .call(flops, seconds, peak);
  EXPECT_DOUBLE_EQ(u[0].item<double>(), 0.5);
  EXPECT_THROW(utilOp("util::utilization")
                   .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>()
                   .call(flops.to(at::kLong), seconds, peak),
               c10::Error);
}

}  // namespace
}  // namespace torchutil
