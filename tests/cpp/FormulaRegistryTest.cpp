#include "core/FormulaRegistry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace torchutil {
namespace {

Cost oneVectorFlop(const Args&, const Args&) {
  return {0, 1};
}

TEST(FormulaRegistryTest, DuplicateRegistrationThrowsNamingTheOp) {
  FormulaRegistry r;
  r.add("aten::foo", OpClass::Vector, &oneVectorFlop);
  try {
    r.add("aten::foo", OpClass::Memory);
    FAIL() << "a second registration of aten::foo was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("aten::foo"), std::string::npos) << e.what();
  }
  // The first registration stands.
  ASSERT_NE(r.find("aten::foo"), nullptr);
  EXPECT_EQ(r.find("aten::foo")->opClass, OpClass::Vector);
  EXPECT_EQ(r.size(), 1u);
}

TEST(FormulaRegistryTest, ArithmeticClassesNeedAFormula) {
  FormulaRegistry r;
  EXPECT_THROW(r.add("aten::a", OpClass::Matrix), std::invalid_argument);
  EXPECT_THROW(r.add("aten::b", OpClass::Vector, nullptr), std::invalid_argument);
  EXPECT_NO_THROW(r.add("aten::c", OpClass::Memory));
  EXPECT_NO_THROW(r.add("aten::d", OpClass::Transparent));
  EXPECT_EQ(r.find("aten::a"), nullptr);
  EXPECT_EQ(r.find("aten::b"), nullptr);
  EXPECT_EQ(r.size(), 2u);
}

TEST(FormulaRegistryTest, InPlaceVariantFallsBackToItsBaseOp) {
  const FormulaRegistry& r = FormulaRegistry::global();
  const FormulaEntry* relu = r.find("aten::relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(r.find("aten::relu_"), relu);
  EXPECT_EQ(r.find("aten::add_"), r.find("aten::add"));
  // An exact entry wins over the fallback: copy_ is registered under its own name.
  ASSERT_NE(r.find("aten::copy_"), nullptr);
  EXPECT_EQ(r.find("aten::copy_")->name, "aten::copy_");
  // Only one trailing underscore is dropped, and only when the base op exists.
  EXPECT_EQ(r.find("aten::relu__"), nullptr);
  EXPECT_EQ(r.find("aten::not_an_op_"), nullptr);
}

TEST(FormulaRegistryTest, WrapperNamespacesAreTransparent) {
  const FormulaRegistry& r = FormulaRegistry::global();
  for (const char* name :
       {"prim::TupleConstruct", "profiler::_record_function_enter_new", "util::profile"}) {
    const FormulaEntry* e = r.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->opClass, OpClass::Transparent) << name;
    EXPECT_EQ(e->formula, nullptr) << name;
  }
  // The namespace must be a prefix, not a substring.
  EXPECT_EQ(r.find("aten::util::x"), nullptr);
  EXPECT_EQ(r.find("myprim::op"), nullptr);
}

TEST(FormulaRegistryTest, UnknownOpIsNull) {
  const FormulaRegistry& r = FormulaRegistry::global();
  EXPECT_EQ(r.find("aten::definitely_not_an_op"), nullptr);
  EXPECT_EQ(r.find("custom::mm"), nullptr);
  EXPECT_EQ(r.find(""), nullptr);
  EXPECT_EQ(r.find("_"), nullptr);
}

TEST(FormulaRegistryTest, NamesAreSortedAndComplete) {
  FormulaRegistry r;
  r.add("aten::mm", OpClass::Matrix, &oneVectorFlop);
  r.add("aten::add", OpClass::Vector, &oneVectorFlop);
  r.add("aten::view", OpClass::Transparent);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"aten::add", "aten::mm", "aten::view"}));

  const std::vector<std::string> all = FormulaRegistry::global().names();
  EXPECT_EQ(all.size(), FormulaRegistry::global().size());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(FormulaRegistryTest, GlobalEntriesAreConsistent) {
  const FormulaRegistry& r = FormulaRegistry::global();
  for (const std::string& name : r.names()) {
    const FormulaEntry* e = r.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->name, name);
    const bool arithmetic = e->opClass == OpClass::Matrix || e->opClass == OpClass::Vector;
    // Memory ops cost bytes only, transparent ones nothing: a formula there would be ignored.
    EXPECT_EQ(e->formula != nullptr, arithmetic) << name << " is " << opClassName(e->opClass);
  }
}

TEST(FormulaRegistryTest, OpClassNames) {
  EXPECT_STREQ(opClassName(OpClass::Matrix), "matrix");
  EXPECT_STREQ(opClassName(OpClass::Vector), "vector");
  EXPECT_STREQ(opClassName(OpClass::Memory), "memory");
  EXPECT_STREQ(opClassName(OpClass::Transparent), "transparent");
}

TEST(FormulaRegistryTest, UserFormulasAreAddedRefusedAndRemoved) {
  FormulaRegistry r;
  r.add("aten::mm", OpClass::Matrix, &oneVectorFlop);
  const uint64_t g0 = r.generation();
  r.addUser("mylib::op", [](const Args& in, const Args&) {
    return Cost{static_cast<int64_t>(in.size()), 0};
  });
  EXPECT_NE(r.generation(), g0);  // counts drop their cached lookups
  const FormulaEntry* e = r.find("mylib::op");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->priced());
  EXPECT_EQ(e->opClass, OpClass::Matrix);
  EXPECT_EQ(e->price({Arg::ofInt(1), Arg::ofInt(2)}, {}).matrixFlops, 2);
  EXPECT_EQ(r.userNames(), (std::vector<std::string>{"mylib::op"}));
  auto message = [&](const std::string& name, bool replace) {
    try {
      r.addUser(
          name, [](const Args&, const Args&) { return Cost{}; }, replace);
    } catch (const std::invalid_argument& err) {
      return std::string(err.what());
    }
    return std::string();
  };
  // A second user's formula and a built-in are refused, naming the op.
  EXPECT_EQ(message("mylib::op", false).rfind("torchutil: a FLOP formula for 'mylib::op'", 0), 0u);
  EXPECT_EQ(message("aten::mm", false).rfind("torchutil: 'aten::mm' has a built-in", 0), 0u);
  // Replacing a built-in keeps it, and removing the user's formula brings it back.
  EXPECT_EQ(message("aten::mm", true), "");
  EXPECT_EQ(r.find("aten::mm")->formula, nullptr);
  r.removeUser("aten::mm");
  EXPECT_EQ(r.find("aten::mm")->formula, &oneVectorFlop);
  r.removeUser("mylib::op");
  EXPECT_EQ(r.find("mylib::op"), nullptr);
  EXPECT_THROW(r.removeUser("mylib::op"), std::invalid_argument);
  EXPECT_THROW(r.removeUser("aten::mm"), std::invalid_argument);  // a built-in stays
  EXPECT_TRUE(r.userNames().empty());
  EXPECT_EQ(r.size(), 1u);
}

// A user's formula's rows are labelled by what it returned; a built-in's by its entry.
TEST(FormulaRegistryTest, AUsersRowIsLabelledByWhatItsFormulaReturned) {
  FormulaRegistry r;
  r.add("aten::relu", OpClass::Vector, &oneVectorFlop);
  r.addUser("mylib::op", [](const Args&, const Args&) { return Cost{}; });
  const FormulaEntry& user = *r.find("mylib::op");
  EXPECT_EQ(user.rowClass(Cost{/*matrixFlops=*/8, /*vectorFlops=*/2}), OpClass::Matrix);
  EXPECT_EQ(user.rowClass(Cost{/*matrixFlops=*/0, /*vectorFlops=*/2}), OpClass::Vector);
  EXPECT_EQ(user.rowClass(Cost{}), OpClass::Memory);
  EXPECT_EQ(r.find("aten::relu")->rowClass(Cost{/*matrixFlops=*/8, /*vectorFlops=*/0}),
            OpClass::Vector);
}

}  // namespace
}  // namespace torchutil
