#include "core/PeakTable.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace torchutil {

// Readable failure messages (found by argument-dependent lookup, so outside the unnamed
// namespace; static, as other tests may print PeakDtype too).
static void PrintTo(PeakDtype d, std::ostream* os) {
  *os << peakDtypeName(d);
}

namespace {

constexpr PeakDtype kAllDtypes[] = {PeakDtype::FP64, PeakDtype::FP32, PeakDtype::TF32,
                                    PeakDtype::FP16, PeakDtype::BF16, PeakDtype::FP8,
                                    PeakDtype::INT8};

std::string datasheetName(const char* deviceName) {
  const DatasheetEntry* e = findDatasheet(deviceName);
  return e != nullptr ? e->name : "<none>";
}

TEST(PeakTableTest, MatchesDeviceNamesAsCudaReportsThem) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"},
      {"NVIDIA H100 PCIe", "NVIDIA H100 PCIe"},
      {"NVIDIA H100 NVL", "NVIDIA H100 NVL"},
      {"NVIDIA H200", "NVIDIA H200 SXM"},
      {"NVIDIA H200 NVL", "NVIDIA H200 NVL"},
      {"NVIDIA A100-SXM4-80GB", "NVIDIA A100"},
      {"NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB"},
      {"NVIDIA A100-PCIE-40GB", "NVIDIA A100 40GB"},
      {"NVIDIA A10", "NVIDIA A10"},
      {"NVIDIA L4", "NVIDIA L4"},
      {"NVIDIA L40S", "NVIDIA L40S"},
      {"Tesla T4", "NVIDIA T4"},
      {"Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2"},
      {"Tesla V100-PCIE-32GB", "NVIDIA V100 PCIe"},
      {"NVIDIA B200", "NVIDIA B200"},
      // Case does not matter.
      {"nvidia h100 pcie", "NVIDIA H100 PCIe"},
  };
  for (const auto& [device, entry] : cases) {
    EXPECT_EQ(datasheetName(device), entry) << device;
  }
}

TEST(PeakTableTest, NamesContainingAnotherChipsNameAreNotConfused) {
  // "A100" contains "A10", "L40S" contains "L4": each must find its own entry.
  EXPECT_EQ(datasheetName("NVIDIA A100-SXM4-80GB"), "NVIDIA A100");
  EXPECT_EQ(datasheetName("NVIDIA A10"), "NVIDIA A10");
  EXPECT_EQ(datasheetName("NVIDIA L40S"), "NVIDIA L40S");
  EXPECT_EQ(datasheetName("NVIDIA L4"), "NVIDIA L4");
  // Chips with other configurations get the computed peak, not a neighbour's datasheet.
  EXPECT_EQ(datasheetName("NVIDIA A10G"), "<none>");
  EXPECT_EQ(datasheetName("NVIDIA L40"), "<none>");
  EXPECT_EQ(datasheetName("NVIDIA GeForce RTX 4090"), "<none>");
  EXPECT_EQ(datasheetName("NVIDIA H20"), "<none>");
  EXPECT_EQ(datasheetName(""), "<none>");
}

TEST(PeakTableTest, DatasheetPeakIsInFlopsPerSecond) {
  const auto h100 = datasheetPeak("NVIDIA H100 80GB HBM3", PeakDtype::FP16);
  ASSERT_TRUE(h100.has_value());
  EXPECT_DOUBLE_EQ(h100->flopsPerSecond, 989.4e12);
  EXPECT_NE(h100->source.find("H100 SXM"), std::string::npos) << h100->source;
  EXPECT_NE(h100->source.find("float16"), std::string::npos) << h100->source;

  const auto a100 = datasheetPeak("NVIDIA A100-SXM4-80GB", PeakDtype::TF32);
  ASSERT_TRUE(a100.has_value());
  EXPECT_DOUBLE_EQ(a100->flopsPerSecond, 156e12);
  EXPECT_EQ(findDatasheet("NVIDIA A100-SXM4-80GB")->memoryGBps, 2039);
  EXPECT_EQ(findDatasheet("NVIDIA A100-PCIE-40GB")->memoryGBps, 1555);
}

TEST(PeakTableTest, UnsupportedDtypeHasNoPeak) {
  // Turing and Volta have no BF16 or TF32 tensor cores, Ampere no FP8.
  EXPECT_FALSE(datasheetPeak("Tesla T4", PeakDtype::BF16).has_value());
  EXPECT_FALSE(datasheetPeak("Tesla T4", PeakDtype::TF32).has_value());
  EXPECT_FALSE(datasheetPeak("Tesla V100-SXM2-16GB", PeakDtype::BF16).has_value());
  EXPECT_FALSE(datasheetPeak("NVIDIA A100-SXM4-80GB", PeakDtype::FP8).has_value());
  EXPECT_TRUE(datasheetPeak("NVIDIA L4", PeakDtype::FP8).has_value());
  EXPECT_FALSE(datasheetPeak("NVIDIA GeForce RTX 4090", PeakDtype::FP16).has_value());
  EXPECT_FALSE(datasheetPeak("NVIDIA H100 PCIe", PeakDtype::kCount).has_value());

  EXPECT_FALSE(computedPeak(7, 5, 40, 1.59e9, PeakDtype::BF16).has_value());
  EXPECT_FALSE(computedPeak(8, 0, 108, 1.41e9, PeakDtype::FP8).has_value());
  EXPECT_FALSE(computedPeak(6, 1, 30, 1.5e9, PeakDtype::FP32).has_value());  // not in the table
  EXPECT_FALSE(computedPeak(9, 0, 0, 1.83e9, PeakDtype::FP16).has_value());
  EXPECT_FALSE(computedPeak(9, 0, 132, 0.0, PeakDtype::FP16).has_value());
}

TEST(PeakTableTest, ComputedPeakOfAnH100) {
  const auto p = computedPeak(9, 0, /*multiprocessors=*/132, /*clockHz=*/1.83e9, PeakDtype::FP16);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(p->flopsPerSecond, 989.4e12, 989.4e12 * 1e-3);
  EXPECT_NE(p->source.find("sm_90"), std::string::npos) << p->source;
  EXPECT_NE(p->source.find("132"), std::string::npos) << p->source;
}

TEST(PeakTableTest, ComputedPeaksAgreeWithDatasheets) {
  // SMs and the boost clock the datasheet's tensor-core figures are quoted at.
  struct Chip {
    const char* device;
    int major, minor, sms;
    double clockHz;
  };
  const Chip chips[] = {
      {"Tesla V100-SXM2-16GB", 7, 0, 80, 1.53e9},
      {"Tesla T4", 7, 5, 40, 1.59e9},
      {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1.41e9},
      {"NVIDIA A10", 8, 6, 72, 1.695e9},
      {"NVIDIA L4", 8, 9, 58, 2.04e9},
      {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1.83e9},
  };
  for (const Chip& c : chips) {
    for (PeakDtype d : {PeakDtype::TF32, PeakDtype::FP16, PeakDtype::BF16, PeakDtype::FP8}) {
      const auto sheet = datasheetPeak(c.device, d);
      const auto computed = computedPeak(c.major, c.minor, c.sms, c.clockHz, d);
      EXPECT_EQ(sheet.has_value(), computed.has_value()) << c.device << " " << peakDtypeName(d);
      if (sheet && computed) {
        EXPECT_NEAR(computed->flopsPerSecond / sheet->flopsPerSecond, 1.0, 0.015)
            << c.device << " " << peakDtypeName(d);
      }
    }
  }
}

TEST(PeakTableTest, ParsesTorchShortAndC10DtypeNames) {
  const std::vector<std::pair<const char*, PeakDtype>> cases = {
      {"float64", PeakDtype::FP64},    {"fp64", PeakDtype::FP64},
      {"Double", PeakDtype::FP64},     {"float32", PeakDtype::FP32},
      {"fp32", PeakDtype::FP32},       {"Float", PeakDtype::FP32},
      {"tf32", PeakDtype::TF32},       {"TF32", PeakDtype::TF32},
      {"float16", PeakDtype::FP16},    {"fp16", PeakDtype::FP16},
      {"Half", PeakDtype::FP16},       {"bfloat16", PeakDtype::BF16},
      {"bf16", PeakDtype::BF16},       {"BFloat16", PeakDtype::BF16},
      {"fp8", PeakDtype::FP8},         {"float8_e4m3fn", PeakDtype::FP8},
      {"Float8_e5m2", PeakDtype::FP8}, {"int8", PeakDtype::INT8},
      {"Char", PeakDtype::INT8},       {"Byte", PeakDtype::INT8},
  };
  for (const auto& [name, dtype] : cases) {
    const auto parsed = parsePeakDtype(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, dtype) << name;
  }
  for (const char* name : {"", "Long", "int64", "complex64", "Bool", "fp16x"}) {
    EXPECT_FALSE(parsePeakDtype(name).has_value()) << name;
  }
  for (PeakDtype d : kAllDtypes) {
    const auto parsed = parsePeakDtype(peakDtypeName(d));
    ASSERT_TRUE(parsed.has_value()) << peakDtypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_STREQ(peakDtypeName(PeakDtype::kCount), "?");
}

TEST(PeakTableTest, Float32CountsAsTf32WhereTf32IsAllowed) {
  EXPECT_EQ(peakDtypeOfTensorDtype("float32", /*tf32Allowed=*/true), PeakDtype::TF32);
  EXPECT_EQ(peakDtypeOfTensorDtype("float32", /*tf32Allowed=*/false), PeakDtype::FP32);
  // TF32 applies to float32 only.
  EXPECT_EQ(peakDtypeOfTensorDtype("float16", /*tf32Allowed=*/true), PeakDtype::FP16);
  EXPECT_EQ(peakDtypeOfTensorDtype("bfloat16", /*tf32Allowed=*/true), PeakDtype::BF16);
  EXPECT_EQ(peakDtypeOfTensorDtype("float64", /*tf32Allowed=*/true), PeakDtype::FP64);
  EXPECT_FALSE(peakDtypeOfTensorDtype("int64", /*tf32Allowed=*/true).has_value());
  EXPECT_FALSE(peakDtypeOfTensorDtype("", /*tf32Allowed=*/false).has_value());
}

}  // namespace
}  // namespace torchutil
