// profileModel's energy phase (energy=True, libtorch/EnergyReading.h) on the CPU with a fake
// energy backend passed through ProfileOptions::backends: a counter on the real clock that
// draws a known power and steps as NVML's does, read over windows of the call's own eager
// forwards; the fields, the text and a refusal as a user reads them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <cmath>
#include <string>

#include "libtorch/Profile.h"
#include "ops/ProfileArgs.h"

namespace torchutil {
namespace {

// 10 mJ a read, the value moving on the first read after each stepSeconds of the wall clock (as
// NVML's steps). On the CPU the windows read the counter once a forward (each finishes inside
// launch()), so this device draws exactly 10 mJ a forward, whatever else the machine runs.
class PerReadCounter final : public EnergyCounter {
 public:
  explicit PerReadCounter(double stepSeconds) : step_(stepSeconds) {}
  std::string source() const override { return "a fake counter of 10 mJ a read"; }
  double wrapJoules() const override { return 0.0; }
  bool read(EnergyReading* out, std::string*) override {
    ++reads_;
    out->seconds = steadyClockSeconds();
    if (out->seconds >= next_) {
      next_ = out->seconds + step_;
      joules_ = 0.01 * static_cast<double>(reads_);
    }
    out->joules = joules_;
    return true;
  }
  std::string notes() override { return "1 other process on the GPU (pid 4242)"; }

 private:
  double step_, next_ = 0.0, joules_ = 0.0;
  int64_t reads_ = 0;
};

class FakeEnergyBackend final : public EnergyBackend {
 public:
  std::unique_ptr<EnergyCounter> open(const HwDevice& device, std::string* why) override {
    ++opened;
    device_ = device.name;
    if (!refusal.empty()) {
      *why = refusal;
      return nullptr;
    }
    return std::make_unique<PerReadCounter>(0.005);
  }
  std::string refusal;
  int opened = 0;
  std::string device_;
};

c10::IValue model() {
  torch::jit::Module m("EnergyModel");
  m.define(R"(
    def forward(self, x):
        return torch.relu(torch.mm(x, x))
  )");
  return c10::IValue(m._ivalue());
}

ProfileOptions options(const HardwareBackends* backends, bool energy) {
  ProfileOptions o;
  o.warmup = 1;
  o.repeat.minIters = 2;
  o.repeat.maxIters = 2;
  o.backends = backends;
  o.energy = energy;
  o.energyPlan.windowSeconds = 0.25;  // five windows of 50 ms against 5 ms steps
  return o;
}

double field(const ProfileOutput& out, Field f) {
  return out.summary[static_cast<size_t>(f)];
}

TEST(EnergyReadingTest, JoulesPerForwardFromTheBackendsCounter) {
  FakeEnergyBackend fake;
  HardwareBackends backends;
  backends.energy = &fake;
  const ProfileOutput out = profileModel(model(), {at::randn({32, 32})}, options(&backends, true));
  EXPECT_EQ(fake.opened, 1);
  EXPECT_EQ(fake.device_, "cpu");
  ASSERT_TRUE(out.energy.result.measured()) << out.energy.text;
  EXPECT_EQ(out.energy.text.rfind("a fake counter of 10 mJ a read, changes every ", 0), 0u)
      << out.energy.text;
  EXPECT_NE(out.energy.text.find(" of eager forwards in 5 windows ("), std::string::npos)
      << out.energy.text;
  EXPECT_NE(out.energy.text.find("; 1 other process on the GPU (pid 4242)"), std::string::npos);
  const double joules = field(out, Field::joules);
  EXPECT_NEAR(joules, 0.01, 1e-4);
  EXPECT_LE(field(out, Field::joules_ci_low), joules);
  EXPECT_GE(field(out, Field::joules_ci_high), joules);
  EXPECT_GT(field(out, Field::watts), 0.0);
  EXPECT_DOUBLE_EQ(field(out, Field::inputs_per_joule), 32.0 / joules);
  EXPECT_DOUBLE_EQ(field(out, Field::flops_per_joule), field(out, Field::flops) / joules);
  EXPECT_EQ(field(out, Field::energy_seconds), out.energy.result.seconds);
  EXPECT_GE(field(out, Field::energy_seconds), 0.2);
  EXPECT_GE(field(out, Field::phase_energy_seconds), field(out, Field::energy_seconds));
  EXPECT_EQ(nameResult(out, false).text("energy_source"), out.energy.text);
}

TEST(EnergyReadingTest, ARefusalIsTheTextAndNaNFields) {
  FakeEnergyBackend fake;
  fake.refusal = "no permission to read the GPU's energy through NVML. (fake)";
  HardwareBackends backends;
  backends.energy = &fake;
  const ProfileOutput out = profileModel(model(), {at::randn({8, 8})}, options(&backends, true));
  EXPECT_EQ(out.energy.text, "off: " + fake.refusal);
  for (Field f : {Field::joules, Field::joules_ci_low, Field::joules_ci_high, Field::watts,
                  Field::flops_per_joule, Field::inputs_per_joule, Field::energy_seconds}) {
    EXPECT_TRUE(std::isnan(field(out, f))) << static_cast<int>(f);
  }
}

TEST(EnergyReadingTest, OffUnlessAskedForAndABadWindowIsAValueError) {
  FakeEnergyBackend fake;
  HardwareBackends backends;
  backends.energy = &fake;
  const ProfileOutput out = profileModel(model(), {at::randn({8, 8})}, options(&backends, false));
  EXPECT_EQ(fake.opened, 0);
  EXPECT_EQ(out.energy.text, "off: energy=False");
  EXPECT_TRUE(std::isnan(field(out, Field::joules)));
  EXPECT_EQ(field(out, Field::phase_energy_seconds), 0.0);
  // The options are checked where they are parsed (core/Options.h), before any run.
  const OptionValues values{{"energy", true}, {"energy_window", -1.0}};  // the rest: defaults
  try {
    profileOptions(values, /*summaryOp=*/false);
    FAIL() << "a negative energy_window was taken";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("energy_window must be"),
              std::string::npos);
  }
  EXPECT_EQ(fake.opened, 0);
}

}  // namespace
}  // namespace torchutil
