#include "core/Roofline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace torchutil {
namespace {

// An H200-like device: 989.4 TFLOP/s fp16, 4.8 TB/s; ridge at ~206 FLOP/B.
constexpr double kPeak = 989.4e12;
constexpr double kBandwidth = 4.8e12;

TEST(RooflineTest, RidgeIsPeakOverBandwidth) {
  EXPECT_DOUBLE_EQ(ridgeIntensity(kPeak, kBandwidth), kPeak / kBandwidth);
  EXPECT_DOUBLE_EQ(ridgeIntensity(/*peak=*/100, /*bandwidth=*/10), 10.0);
}

TEST(RooflineTest, AttainableIsTheLowerRoof) {
  EXPECT_DOUBLE_EQ(attainableFlopsPerSecond(/*intensity=*/1, 100, 10), 10.0);
  EXPECT_DOUBLE_EQ(attainableFlopsPerSecond(/*intensity=*/10, 100, 10), 100.0);
  EXPECT_DOUBLE_EQ(attainableFlopsPerSecond(/*intensity=*/1000, 100, 10), 100.0);
  EXPECT_DOUBLE_EQ(attainableFlopsPerSecond(std::numeric_limits<double>::infinity(), 100, 10),
                   100.0);
  EXPECT_TRUE(std::isnan(attainableFlopsPerSecond(std::nan(""), 100, 10)));
}

TEST(RooflineTest, ClassifiesByIntensityWithoutMeasurement) {
  // A large convolution, 231 MFLOP over 0.8 MB (~289 FLOP/B): above the ridge.
  RooflinePoint conv = placeOnRoofline(231e6, 0.8e6, kPeak, kBandwidth);
  EXPECT_EQ(conv.bound, RooflineBound::Compute);
  EXPECT_DOUBLE_EQ(conv.attainableUtilization, 1.0);
  EXPECT_TRUE(std::isnan(conv.achievedFlopsPerSecond));
  // A ReLU: 1 FLOP per element, 4 bytes in and 4 out.
  RooflinePoint relu = placeOnRoofline(1e6, 8e6, kPeak, kBandwidth);
  EXPECT_EQ(relu.bound, RooflineBound::Memory);
  EXPECT_DOUBLE_EQ(relu.intensity, 0.125);
  EXPECT_NEAR(relu.attainableUtilization, 0.125 * kBandwidth / kPeak, 1e-15);
  EXPECT_DOUBLE_EQ(relu.rooflineSeconds, 8e6 / kBandwidth);
  // Exactly at the ridge counts as compute-bound.
  EXPECT_EQ(placeOnRoofline(/*flops=*/100, /*bytes=*/10, 100, 10).bound, RooflineBound::Compute);
}

TEST(RooflineTest, OverheadWhenTheRooflineExplainsLessThanHalfTheKernelTime) {
  // 2 MB at 4.8 TB/s is ~0.42 us; a 5 us kernel spends most of its time on neither.
  RooflinePoint small = placeOnRoofline(1e6, 2e6, kPeak, kBandwidth, /*kernelSeconds=*/5e-6);
  EXPECT_EQ(small.bound, RooflineBound::Overhead);
  EXPECT_NEAR(small.rooflineShare, (2e6 / kBandwidth) / 5e-6, 1e-12);
  EXPECT_DOUBLE_EQ(small.achievedFlopsPerSecond, 1e6 / 5e-6);
  // The same op at 0.6 us: the roofline explains 70 %, so it stays memory-bound.
  RooflinePoint fast = placeOnRoofline(1e6, 2e6, kPeak, kBandwidth, /*kernelSeconds=*/0.6e-6);
  EXPECT_EQ(fast.bound, RooflineBound::Memory);
  // Faster than the roofline (data in cache) is not overhead either.
  EXPECT_EQ(placeOnRoofline(1e6, 2e6, kPeak, kBandwidth, 1e-7).bound, RooflineBound::Memory);
  // No or unusable measurement: classified by intensity.
  EXPECT_EQ(placeOnRoofline(1e6, 2e6, kPeak, kBandwidth, 0.0).bound, RooflineBound::Memory);
  EXPECT_EQ(placeOnRoofline(1e6, 2e6, kPeak, kBandwidth, std::nan("")).bound,
            RooflineBound::Memory);
}

TEST(RooflineTest, EmptyAndByteFreeOps) {
  RooflinePoint empty = placeOnRoofline(0, 0, kPeak, kBandwidth);
  EXPECT_EQ(empty.bound, RooflineBound::Unknown);
  EXPECT_TRUE(std::isnan(empty.attainableUtilization));
  RooflinePoint noBytes = placeOnRoofline(10, 0, kPeak, kBandwidth);
  EXPECT_EQ(noBytes.bound, RooflineBound::Compute);
  EXPECT_DOUBLE_EQ(noBytes.attainableUtilization, 1.0);
  RooflinePoint noFlops = placeOnRoofline(0, 10, kPeak, kBandwidth);
  EXPECT_EQ(noFlops.bound, RooflineBound::Memory);
  EXPECT_DOUBLE_EQ(noFlops.attainableUtilization, 0.0);
}

TEST(RooflineTest, RejectsBadInputs) {
  EXPECT_THROW(placeOnRoofline(1, 1, 0, kBandwidth), std::invalid_argument);
  EXPECT_THROW(placeOnRoofline(1, 1, kPeak, -1), std::invalid_argument);
  EXPECT_THROW(placeOnRoofline(1, 1, kPeak, std::numeric_limits<double>::infinity()),
               std::invalid_argument);
  EXPECT_THROW(placeOnRoofline(-1, 1, kPeak, kBandwidth), std::invalid_argument);
  EXPECT_THROW(ridgeIntensity(std::nan(""), kBandwidth), std::invalid_argument);
}

TEST(RooflineTest, BoundNames) {
  EXPECT_STREQ(rooflineBoundName(RooflineBound::Compute), "compute-bound");
  EXPECT_STREQ(rooflineBoundName(RooflineBound::Memory), "memory-bound");
  EXPECT_STREQ(rooflineBoundName(RooflineBound::Overhead), "overhead-bound");
  EXPECT_STREQ(rooflineBoundName(RooflineBound::Unknown), "unknown");
}

}  // namespace
}  // namespace torchutil
