// The result's field lists (core/ResultSchema.h) and the table that is filled by them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include "core/ResultSchema.h"

namespace torchutil {
namespace {

TEST(ResultSchemaTest, EveryTableHasUniqueDocumentedNames) {
  for (const std::string& table : schemaNames()) {
    std::set<std::string> seen;
    for (const FieldSpec& f : schema(table)) {
      EXPECT_TRUE(seen.insert(f.name).second) << table << "." << f.name << " twice";
      EXPECT_FALSE(std::string(f.name).empty()) << table;
    }
    EXPECT_FALSE(seen.empty()) << table;
  }
  // The summary is a float64 tensor: every field numeric and documented.
  for (const FieldSpec& f : schema("summary")) {
    EXPECT_NE(f.kind, ValueKind::Text) << f.name;
    EXPECT_FALSE(std::string(f.doc).empty()) << f.name;
  }
  for (const FieldSpec& f : schema("texts")) {
    EXPECT_EQ(f.kind, ValueKind::Text) << f.name;
  }
}

TEST(ResultSchemaTest, EnumsFollowTheFieldOrder) {
  EXPECT_EQ(schema("summary").size(), static_cast<size_t>(Field::kCount));
  EXPECT_EQ(schema("ops").size(), static_cast<size_t>(OpField::kCount));
  EXPECT_EQ(schema("kernels").size(), static_cast<size_t>(KernelField::kCount));
  EXPECT_EQ(schema("roofline").size(), static_cast<size_t>(RooflineField::kCount));
  EXPECT_STREQ(schema("ops")[static_cast<size_t>(OpField::kernel_seconds)].name, "kernel_seconds");
  EXPECT_STREQ(schema("kernels")[static_cast<size_t>(KernelField::forward)].name, "forward");
}

TEST(ResultSchemaTest, UnknownTableOrFieldIsNamed) {
  try {
    schema("opps");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'opps'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kernels"), std::string::npos) << e.what();
  }
  ResultTable t("unknown_ops");
  EXPECT_THROW(t.textColumn("calls"), std::invalid_argument);  // numeric, not text
  EXPECT_THROW(t.numberColumn("callz"), std::invalid_argument);
  EXPECT_THROW(t.set(/*row=*/0, UnknownOpField::calls, 1.0), std::out_of_range);  // no row yet
}

TEST(ResultSchemaTest, TableFillsByFieldAndFlattensNumbersRowMajor) {
  ResultTable t("unknown_ops");
  EXPECT_EQ(t.numericWidth(), 1u);
  const size_t a = t.addRow();
  const size_t b = t.addRow();
  t.setText(a, UnknownOpField::op, "aten::foo");
  t.set(a, UnknownOpField::calls, 3);
  t.setText(b, UnknownOpField::op, "aten::bar");
  EXPECT_EQ(t.textColumn("op"), (std::vector<std::string>{"aten::foo", "aten::bar"}));
  const std::vector<double> n = t.numbers();
  ASSERT_EQ(n.size(), 2u);
  EXPECT_DOUBLE_EQ(n[0], 3);
  EXPECT_TRUE(std::isnan(n[1]));  // unset numbers stay NaN
  EXPECT_THROW(t.setText(a, UnknownOpField::calls, "x"), std::out_of_range);

  ResultTable ops("ops");
  const size_t r = ops.addRow();
  ops.set(r, OpField::calls, 2);
  ops.set(r, OpField::lost_seconds, 0.5);
  const std::vector<double> row = ops.numbers();
  ASSERT_EQ(row.size(), ops.numericWidth());
  EXPECT_DOUBLE_EQ(row.front(), 2);  // calls: the first numeric field
  // lost_seconds: at its place among the numeric fields, the fields after it unset.
  const std::vector<std::string> numeric = numericFieldNames("ops");
  const size_t lost = static_cast<size_t>(
      std::find(numeric.begin(), numeric.end(), "lost_seconds") - numeric.begin());
  ASSERT_LT(lost, row.size());
  EXPECT_DOUBLE_EQ(row[lost], 0.5);
  EXPECT_TRUE(std::isnan(row.back()));
}

TEST(ResultSchemaTest, NamedResultTextsByName) {
  NamedResult r;
  r.setText(TextField::trace_status, "on");
  EXPECT_EQ(r.text("trace_status"), "on");
  EXPECT_EQ(r.text("peak_source"), "");
  EXPECT_THROW(r.text("nope"), std::invalid_argument);
  EXPECT_EQ(&r.table("kernels"), &r.kernels);
  EXPECT_THROW(r.table("summary"), std::invalid_argument);
}

}  // namespace
}  // namespace torchutil
