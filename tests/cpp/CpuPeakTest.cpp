#include "core/CpuPeak.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace torchutil {
namespace {

// /proc/cpuinfo of this project's 2-core machine (AMD EPYC, Zen 4: family 25, model 17),
// abridged to the lines the peak reads and a few it must pass over.
const char* kZen4 = R"(processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
cpu MHz		: 2596.126
physical id	: 0
core id		: 0
flags		: fpu sse sse2 avx fma avx2 avx512f avx512dq avx512_bf16 avx512_vnni f16c
bogomips	: 5192.25

processor	: 1
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
cpu MHz		: 2596.126
physical id	: 0
core id		: 1
flags		: fpu sse sse2 avx fma avx2 avx512f avx512dq avx512_bf16 avx512_vnni f16c
)";

// Two logical CPUs (SMT siblings) of one core of an Intel Xeon (Sapphire Rapids) with AMX.
const char* kSapphireRapidsSmt = R"(processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 143
model name	: Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz
cpu MHz		: 800.000
physical id	: 0
core id		: 0
flags		: sse2 avx fma avx2 avx512f avx512_bf16 avx512_fp16 avx512_vnni amx_bf16 amx_int8 amx_tile

processor	: 1
vendor_id	: GenuineIntel
cpu family	: 6
model		: 143
model name	: Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz
cpu MHz		: 3800.000
physical id	: 0
core id		: 0
flags		: sse2 avx fma avx2 avx512f avx512_bf16 avx512_fp16 avx512_vnni amx_bf16 amx_int8 amx_tile
)";

// Zen 1 (EPYC 7601: family 23, model 1) and Zen 2 (EPYC 7B12: family 23, model 49), one core each.
std::string amd(int model, const char* name) {
  return std::string("processor : 0\nvendor_id : AuthenticAMD\ncpu family : 23\nmodel : ") +
         std::to_string(model) + "\nmodel name : " + name +
         "\ncpu MHz : 2250.000\nphysical id : 0\ncore id : 0\nflags : sse2 avx fma avx2\n";
}

TEST(CpuPeakTest, ReadsTheFirstProcessorAndCountsCores) {
  const CpuDescription cpu = parseCpuinfo(kZen4);
  EXPECT_EQ(cpu.vendor, "AuthenticAMD");
  EXPECT_EQ(cpu.family, 25);
  EXPECT_EQ(cpu.model, 17);
  EXPECT_EQ(cpu.modelName, "AMD EPYC");
  EXPECT_DOUBLE_EQ(cpu.cpuinfoMHz, 2596.126);
  EXPECT_EQ(cpu.physicalCores, 2);
  EXPECT_TRUE(cpu.flags.count("avx512f") > 0);
  EXPECT_FALSE(cpu.flags.count("avx512") > 0);
  // The affinity: processor 1 alone is one core.
  EXPECT_EQ(parseCpuinfo(kZen4, {1}).physicalCores, 1);
  // SMT siblings share their core's units: one core.
  EXPECT_EQ(parseCpuinfo(kSapphireRapidsSmt).physicalCores, 1);
  // The first processor's clock, not the second's.
  EXPECT_DOUBLE_EQ(parseCpuinfo(kSapphireRapidsSmt).cpuinfoMHz, 800.0);
}

TEST(CpuPeakTest, RefusesTextWithoutAProcessor) {
  EXPECT_THROW(parseCpuinfo("flags : avx2\n"), std::invalid_argument);
  EXPECT_THROW(parseCpuinfo(""), std::invalid_argument);
}

// Hand-computed for this project's machine: Zen 4 runs AVX-512 on two 256-bit FMA units, so a
// core does 2 units x 8 float32 lanes x 2 FLOPs = 32 FLOP/clock; 2 cores x 2.596126 GHz x 32 =
// 166.152 GFLOP/s (its measured float32 GEMM peaked at 164 GFLOP/s on a quiet run).
TEST(CpuPeakTest, ThisMachineByHand) {
  const CpuDescription cpu = parseCpuinfo(kZen4);
  const auto fp32 = computedCpuPeak(cpu, std::nullopt, /*threads=*/2, PeakDtype::FP32);
  ASSERT_TRUE(fp32.has_value());
  EXPECT_DOUBLE_EQ(fp32->flopsPerSecond, 2 * 2.596126e9 * 32);
  EXPECT_EQ(fp32->source,
            "computed: 2 cores x 2.59613 GHz (/proc/cpuinfo's cpu MHz) x 32 float32 FLOP/clock (2 "
            "FMA units x 256-bit (AVX-512 on 256-bit units))");
  EXPECT_DOUBLE_EQ(computedCpuPeak(cpu, std::nullopt, 2, PeakDtype::FP64)->flopsPerSecond,
                   2 * 2.596126e9 * 16);
  EXPECT_DOUBLE_EQ(computedCpuPeak(cpu, std::nullopt, 2, PeakDtype::BF16)->flopsPerSecond,
                   2 * 2.596126e9 * 64);
  EXPECT_DOUBLE_EQ(computedCpuPeak(cpu, std::nullopt, 2, PeakDtype::FP16)->flopsPerSecond,
                   2 * 2.596126e9 * 32);
  EXPECT_DOUBLE_EQ(computedCpuPeak(cpu, std::nullopt, 2, PeakDtype::INT8)->flopsPerSecond,
                   2 * 2.596126e9 * 128);
  EXPECT_FALSE(computedCpuPeak(cpu, std::nullopt, 2, PeakDtype::FP8).has_value());
}

TEST(CpuPeakTest, CountsTheThreadsThatRunUpToTheCores) {
  const CpuDescription cpu = parseCpuinfo(kZen4);
  EXPECT_DOUBLE_EQ(computedCpuPeak(cpu, std::nullopt, 1, PeakDtype::FP32)->flopsPerSecond,
                   2.596126e9 * 32);
  EXPECT_DOUBLE_EQ(computedCpuPeak(cpu, std::nullopt, 8, PeakDtype::FP32)->flopsPerSecond,
                   2 * 2.596126e9 * 32);
  EXPECT_FALSE(computedCpuPeak(cpu, std::nullopt, 0, PeakDtype::FP32).has_value());
}

TEST(CpuPeakTest, ClockFromCpufreqThenTheModelNameThenCpuinfo) {
  const CpuDescription spr = parseCpuinfo(kSapphireRapidsSmt);
  // cpufreq's limit (kHz) first: it does not move with the load, as "cpu MHz" does.
  auto c = cpuClock(spr, 3.8e6);
  EXPECT_DOUBLE_EQ(c->hz, 3.8e9);
  EXPECT_EQ(c->source, "cpufreq's cpuinfo_max_freq");
  c = cpuClock(spr, std::nullopt);
  EXPECT_DOUBLE_EQ(c->hz, 2.0e9);
  EXPECT_EQ(c->source, "the model name's nominal clock");
  c = cpuClock(parseCpuinfo(kZen4), std::nullopt);
  EXPECT_DOUBLE_EQ(c->hz, 2596.126e6);
  EXPECT_FALSE(cpuClock(parseCpuinfo("processor : 0\nflags : avx2\n"), std::nullopt).has_value());
}

TEST(CpuPeakTest, MatrixUnitsAndVectorDotProducts) {
  const CpuDescription spr = parseCpuinfo(kSapphireRapidsSmt);
  // AVX-512 on 512-bit units: 2 x 16 lanes x 2 = 64 float32 FLOP/clock.
  EXPECT_DOUBLE_EQ(cpuFlopsPerClock(spr, PeakDtype::FP32)->flopsPerClock, 64);
  EXPECT_DOUBLE_EQ(cpuFlopsPerClock(spr, PeakDtype::BF16)->flopsPerClock, 1024);
  EXPECT_EQ(cpuFlopsPerClock(spr, PeakDtype::BF16)->unit, "AMX-BF16 tiles");
  EXPECT_DOUBLE_EQ(cpuFlopsPerClock(spr, PeakDtype::INT8)->flopsPerClock, 2048);
  EXPECT_DOUBLE_EQ(cpuFlopsPerClock(spr, PeakDtype::FP16)->flopsPerClock, 128);  // AVX512_FP16
  // One core (two SMT threads) at the nominal 2.0 GHz: 2e9 x 64.
  EXPECT_DOUBLE_EQ(computedCpuPeak(spr, std::nullopt, 2, PeakDtype::FP32)->flopsPerSecond,
                   2.0e9 * 64);
}

TEST(CpuPeakTest, ZenOneSplitsAvx2OverHalfWidthUnits) {
  // Zen 1: 2 x 128-bit FMA units, 2 x 4 x 2 = 16; Zen 2: 2 x 256-bit, 32.
  EXPECT_DOUBLE_EQ(
      cpuFlopsPerClock(parseCpuinfo(amd(1, "AMD EPYC 7601")), PeakDtype::FP32)->flopsPerClock, 16);
  EXPECT_DOUBLE_EQ(
      cpuFlopsPerClock(parseCpuinfo(amd(49, "AMD EPYC 7B12")), PeakDtype::FP32)->flopsPerClock, 32);
  // Neither has VNNI nor AMX: no int8 rule (a measured peak then).
  EXPECT_FALSE(cpuFlopsPerClock(parseCpuinfo(amd(49, "AMD EPYC 7B12")), PeakDtype::INT8));
}

TEST(CpuPeakTest, NoVectorUnitNoPeak) {
  const CpuDescription bare = parseCpuinfo("processor : 0\ncpu MHz : 1000\nflags : fpu\n");
  EXPECT_FALSE(computedCpuPeak(bare, std::nullopt, 1, PeakDtype::FP32).has_value());
}

}  // namespace
}  // namespace torchutil
