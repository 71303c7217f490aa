// A measured rate's repetitions summarized, and rates written for people.
#include "core/RateSpread.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace torchutil {
namespace {

TEST(RateSpreadTest, QuartilesInterpolateBetweenOrderStatistics) {
  // Sorted: 10 20 30 40 50; ranks 0.25 * 4 = 1 and 0.75 * 4 = 3 fall on values.
  const RateSpread s = summarizeRates({50, 10, 40, 20, 30});
  EXPECT_EQ(s.repetitions, 5);
  EXPECT_EQ(s.best, 50);
  EXPECT_EQ(s.min, 10);
  EXPECT_EQ(s.q1, 20);
  EXPECT_EQ(s.median, 30);
  EXPECT_EQ(s.q3, 40);
  EXPECT_DOUBLE_EQ(s.relativeSpread(), 20.0 / 30.0);
  // Four values: ranks 0.75, 1.5, 2.25 between 1 2 3 5.
  const RateSpread four = summarizeRates({5, 1, 3, 2});
  EXPECT_DOUBLE_EQ(four.q1, 1.75);
  EXPECT_DOUBLE_EQ(four.median, 2.5);
  EXPECT_DOUBLE_EQ(four.q3, 3.5);
}

TEST(RateSpreadTest, ASpreadIsWideAboveTwentyPercent) {
  // The middle half within +-5 % of the median: narrow, however far off one outlier is.
  EXPECT_FALSE(summarizeRates({95, 100, 100, 100, 105, 10}).wide());
  // The CPU of issue #21: repetitions from 11 to 103 GFLOP/s.
  const RateSpread loaded = summarizeRates({11e9, 25e9, 40e9, 60e9, 80e9, 103e9});
  EXPECT_TRUE(loaded.wide());
  EXPECT_GT(loaded.relativeSpread(), kWideRateSpread);
  const RateSpread none = summarizeRates({});
  EXPECT_EQ(none.repetitions, 0);
  EXPECT_TRUE(std::isnan(none.relativeSpread()));
  EXPECT_FALSE(none.wide());
}

TEST(RateSpreadTest, RatesAreWrittenWithAPrefixAndThreeDigits) {
  EXPECT_EQ(formatRate(989.4e12, "FLOP/s"), "989 TFLOP/s");
  EXPECT_EQ(formatRate(45.23e9, "FLOP/s"), "45.2 GFLOP/s");
  EXPECT_EQ(formatRate(0.011e12, "FLOP/s"), "11.0 GFLOP/s");
  EXPECT_EQ(formatRate(4.8e12, "B/s"), "4.80 TB/s");
  EXPECT_EQ(formatRate(812e6, "FLOP/s"), "812 MFLOP/s");
  EXPECT_EQ(formatRate(999.7e9, "FLOP/s"), "1.00 TFLOP/s");  // not "1000 GFLOP/s"
  EXPECT_EQ(formatRate(99.97e9, "FLOP/s"), "100 GFLOP/s");   // not "100.0"
  EXPECT_EQ(formatRate(0.5, "FLOP/s"), "0.50 FLOP/s");
  EXPECT_EQ(formatRate(2e18, "FLOP/s"), "2000 PFLOP/s");
}

TEST(RateSpreadTest, TheDescriptionGivesTheSpreadAndSaysWhenItIsWide) {
  const std::string narrow =
      describeSpread(summarizeRates({40e9, 41e9, 42e9, 43e9, 45e9}), "FLOP/s");
  EXPECT_EQ(narrow,
            "best 45.0 GFLOP/s of 5 repetitions; median 42.0, quartiles 41.0-43.0, min 40.0 "
            "GFLOP/s (spread 5 %)");
  const std::string wide =
      describeSpread(summarizeRates({11e9, 25e9, 40e9, 60e9, 103e9}), "FLOP/s");
  EXPECT_NE(wide.find("best 103 GFLOP/s of 5 repetitions; median 40.0, quartiles 25.0-60.0, min "
                      "11.0 GFLOP/s (spread 88 %)"),
            std::string::npos)
      << wide;
  EXPECT_NE(wide.find("The spread is wide"), std::string::npos) << wide;
  EXPECT_NE(wide.find("peak_flops="), std::string::npos) << wide;
  EXPECT_EQ(describeSpread(summarizeRates({}), "FLOP/s"), "no repetitions");
}

}  // namespace
}  // namespace torchutil
