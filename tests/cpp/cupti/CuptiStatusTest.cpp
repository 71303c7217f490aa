// What each CUPTI result means for the user (cupti::failureKind): the results that say the
// driver refuses counters, that the GPU or sandbox has none, or that another tool holds them
// turn into the sentences of explainFailure, whichever call failed (the range profiler's, the
// PM sampler's or the activity tracer's). No libcupti is needed: the results are values of
// cupti_result.h.
#include <gtest/gtest.h>

#include "cupti/CuptiStatus.h"

namespace torchutil::cupti {
namespace {

TEST(CuptiStatusTest, ARefusedPermissionIsNoPermissionWhereverItComesFrom) {
  EXPECT_EQ(failureKind(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES), HwFailure::NoPermission);
  EXPECT_EQ(failureKind(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES),
            HwFailure::NoPermission);
}

TEST(CuptiStatusTest, ATraceRefusedForAnotherSubscriberReadsAsAnotherProfiler) {
  EXPECT_EQ(failureKind(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), HwFailure::OtherProfiler);
  EXPECT_EQ(failureKind(CUPTI_ERROR_HARDWARE_BUSY), HwFailure::OtherProfiler);
  EXPECT_EQ(failureKind(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED), HwFailure::OtherProfiler);
}

TEST(CuptiStatusTest, UnsupportedDevicesAndSandboxesAreNotSupported) {
  for (CUptiResult r : {CUPTI_ERROR_NOT_SUPPORTED, CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED,
                        CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED, CUPTI_ERROR_API_NOT_IMPLEMENTED,
                        CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED}) {
    EXPECT_EQ(failureKind(r), HwFailure::NotSupported) << r;
  }
}

TEST(CuptiStatusTest, OtherResultsAreTheCallsOwnTextAlone) {
  EXPECT_EQ(failureKind(CUPTI_ERROR_OUT_OF_MEMORY), HwFailure::Other);
  EXPECT_EQ(failureKind(CUPTI_ERROR_INVALID_PARAMETER), HwFailure::Other);
  EXPECT_EQ(explainFailure(HwFailure::Other, "cuptiActivityFlushAll(0)", "CUPTI_ERROR_UNKNOWN"),
            "cuptiActivityFlushAll(0) failed (CUPTI_ERROR_UNKNOWN)");
}

}  // namespace
}  // namespace torchutil::cupti
