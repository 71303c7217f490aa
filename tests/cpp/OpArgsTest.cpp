#include "core/OpArgs.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace torchutil {
namespace {

TEST(OpArgsTest, NumelIsTheProductOfSizes) {
  EXPECT_EQ(Arg::ofTensor({2, 3, 5}).tensor.numel(), 30);
  EXPECT_EQ(Arg::ofTensor({7}).tensor.numel(), 7);
  EXPECT_EQ(Arg::ofTensor({4, 0, 3}).tensor.numel(), 0);
  // A 0-d tensor holds one element.
  EXPECT_EQ(Arg::ofTensor({}).tensor.numel(), 1);
}

TEST(OpArgsTest, NbytesUsesTheElementSize) {
  EXPECT_EQ(Arg::ofTensor({2, 3}, /*elementSize=*/2, "float16").tensor.nbytes(), 12);
  EXPECT_EQ(Arg::ofTensor({2, 3}, /*elementSize=*/8, "float64").tensor.nbytes(), 48);
  EXPECT_EQ(Arg::ofTensor({}, /*elementSize=*/4).tensor.nbytes(), 4);
}

TEST(OpArgsTest, SizeCountsNegativeDimensionsFromTheEnd) {
  const TensorInfo t = Arg::ofTensor({2, 3, 5}).tensor;
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(2), 5);
  EXPECT_EQ(t.size(-1), 5);
  EXPECT_EQ(t.size(-3), 2);
}

TEST(OpArgsTest, SizeOutOfRangeThrows) {
  const TensorInfo t = Arg::ofTensor({2, 3}).tensor;
  EXPECT_THROW(t.size(2), std::out_of_range);
  EXPECT_THROW(t.size(-3), std::out_of_range);
  EXPECT_THROW(Arg::ofTensor({}).tensor.size(0), std::out_of_range);
  EXPECT_THROW(Arg::ofTensor({}).tensor.size(-1), std::out_of_range);
}

TEST(OpArgsTest, FactoriesSetKindAndValues) {
  const Arg i = Arg::ofInt(-3);
  EXPECT_EQ(i.kind, ArgKind::Int);
  EXPECT_EQ(i.ints, std::vector<int64_t>{-3});
  EXPECT_EQ(i.number, -3.0);

  const Arg l = Arg::ofInts({1, 2, 3});
  EXPECT_EQ(l.kind, ArgKind::IntList);
  EXPECT_EQ(l.ints, (std::vector<int64_t>{1, 2, 3}));

  const Arg b = Arg::ofBool(true);
  EXPECT_EQ(b.kind, ArgKind::Bool);
  EXPECT_TRUE(b.flag);
  EXPECT_EQ(b.number, 1.0);

  const Arg t = Arg::ofTensor({2}, /*elementSize=*/2, "bfloat16");
  EXPECT_TRUE(t.isTensor());
  EXPECT_STREQ(t.tensor.dtype, "bfloat16");
  EXPECT_FALSE(Arg::none().isTensor());
  EXPECT_EQ(Arg::none().kind, ArgKind::None);
}

TEST(OpArgsTest, TotalBytesSumsTensorsAndTensorLists) {
  Arg list;
  list.kind = ArgKind::TensorList;
  list.tensors = {Arg::ofTensor({4}, /*elementSize=*/2).tensor,
                  Arg::ofTensor({2, 2}, /*elementSize=*/8).tensor};
  const Args args = {Arg::ofTensor({3, 5}, /*elementSize=*/4),
                     Arg::ofInt(100),
                     Arg::none(),
                     list,
                     Arg::ofInts({7, 7}),
                     Arg::ofDouble(2.5)};
  EXPECT_EQ(totalBytes(args), 3 * 5 * 4 + 4 * 2 + 4 * 8);
  EXPECT_EQ(totalBytes({}), 0);
  EXPECT_EQ(totalBytes({Arg::ofInt(8), Arg::ofBool(true)}), 0);
}

TEST(OpArgsTest, FirstTensorSkipsNonTensorsAndEmptyLists) {
  Arg emptyList;
  emptyList.kind = ArgKind::TensorList;
  Arg list;
  list.kind = ArgKind::TensorList;
  list.tensors = {Arg::ofTensor({9}).tensor};

  EXPECT_EQ(firstTensor({}), nullptr);
  EXPECT_EQ(firstTensor({Arg::ofInt(1), Arg::none()}), nullptr);

  const Args direct = {Arg::ofInt(1), Arg::ofTensor({2, 3}), Arg::ofTensor({4})};
  ASSERT_NE(firstTensor(direct), nullptr);
  EXPECT_EQ(firstTensor(direct)->sizes, (std::vector<int64_t>{2, 3}));

  const Args viaList = {emptyList, list, Arg::ofTensor({4})};
  ASSERT_NE(firstTensor(viaList), nullptr);
  EXPECT_EQ(firstTensor(viaList)->sizes, std::vector<int64_t>{9});
}

TEST(OpArgsTest, TorchDtypeNamesAreThePythonSpelling) {
  EXPECT_STREQ(torchDtypeName("Half"), "float16");
  EXPECT_STREQ(torchDtypeName("BFloat16"), "bfloat16");
  EXPECT_STREQ(torchDtypeName("Float"), "float32");
  EXPECT_STREQ(torchDtypeName("Long"), "int64");
  EXPECT_STREQ(torchDtypeName("Float8_e4m3fn"), "float8_e4m3fn");
  EXPECT_STREQ(torchDtypeName("QInt8"), "qint8");
  EXPECT_STREQ(torchDtypeName("QUInt4x2"), "QUInt4x2");  // no other name: passed through
}

}  // namespace
}  // namespace torchutil
