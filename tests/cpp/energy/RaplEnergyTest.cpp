// RAPL's reader (energy/RaplEnergy.h) on fake powercap folders laid out as Linux's intel_rapl
// driver lays out /sys/class/powercap: top-level package domains summed, their subzones left
// out, each counter unwrapped at its max_energy_range_uj, every failure a sentence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "energy/RaplEnergy.h"

namespace torchutil::rapl {
namespace {

namespace fs = std::filesystem;

class FakePowercap {
 public:
  explicit FakePowercap(const std::string& tag)
      : root_(fs::temp_directory_path() /
              ("torchutil-powercap-" + std::to_string(getpid()) + "-" + tag)) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakePowercap() { fs::remove_all(root_); }

  void domain(const std::string& dir, const std::string& name, uint64_t uj, uint64_t max) {
    fs::create_directories(root_ / dir);
    write(dir + "/name", name);
    write(dir + "/max_energy_range_uj", std::to_string(max));
    set(dir, uj);
  }
  // Rewrites energy_uj in place (the reader keeps it open, as sysfs files are).
  void set(const std::string& dir, uint64_t uj) { write(dir + "/energy_uj", std::to_string(uj)); }
  std::string root() const { return root_.string(); }

 private:
  void write(const std::string& file, const std::string& text) {
    std::ofstream(root_ / file) << text << "\n";
  }
  fs::path root_;
};

TEST(RaplEnergyTest, SumsThePackagesAndLeavesOutSubzones) {
  FakePowercap p("sum");
  p.domain("intel-rapl:0", "package-0", 5'000'000, 262'143'328'850);
  p.domain("intel-rapl:0:0", "dram", 1'000'000, 65'712'999'613);
  p.domain("intel-rapl:1", "package-1", 7'000'000, 262'143'328'850);
  std::string why;
  std::unique_ptr<EnergyCounter> c = openEnergyCounter(p.root(), &why);
  ASSERT_NE(c, nullptr) << why;
  EXPECT_EQ(c->source(), "RAPL energy of package-0 + package-1 (" + p.root() +
                             "; the whole package, every process on it)");
  EnergyReading first, second;
  ASSERT_TRUE(c->read(&first, &why)) << why;
  p.set("intel-rapl:0", 5'250'000);
  p.set("intel-rapl:0:0", 9'000'000);  // not a package: not counted
  p.set("intel-rapl:1", 7'500'000);
  ASSERT_TRUE(c->read(&second, &why)) << why;
  EXPECT_NEAR(second.joules - first.joules, 0.75, 1e-12);
  EXPECT_GE(second.seconds, first.seconds);
}

TEST(RaplEnergyTest, EachCounterIsUnwrappedAtItsRange) {
  FakePowercap p("wrap");
  p.domain("intel-rapl:0", "package-0", 900'000, 1'000'000);
  std::string why;
  std::unique_ptr<EnergyCounter> c = openEnergyCounter(p.root(), &why);
  ASSERT_NE(c, nullptr) << why;
  EnergyReading a, b;
  ASSERT_TRUE(c->read(&a, &why));
  p.set("intel-rapl:0", 100'000);  // 0.9 J -> wrapped at 1 J -> 0.1 J: 0.2 J later
  ASSERT_TRUE(c->read(&b, &why));
  EXPECT_NEAR(b.joules - a.joules, 0.2, 1e-12);
}

TEST(RaplEnergyTest, NoPowercapIsRefusedWithTheReason) {
  std::string why;
  EXPECT_EQ(openEnergyCounter("/nonexistent/powercap", &why), nullptr);
  EXPECT_EQ(why.rfind("no RAPL domain under /nonexistent/powercap (", 0), 0u) << why;
  EXPECT_NE(why.find("Linux's powercap files"), std::string::npos);
  FakePowercap empty("empty");
  EXPECT_EQ(openEnergyCounter(empty.root(), &why), nullptr);
  EXPECT_EQ(why.rfind("no RAPL domain under " + empty.root() + ": ", 0), 0u) << why;
}

TEST(RaplEnergyTest, UnreadableCounterIsRefused) {
  FakePowercap p("unreadable");
  fs::create_directories(fs::path(p.root()) / "intel-rapl:0" / "energy_uj");  // not a file
  std::string why;
  EXPECT_EQ(openEnergyCounter(p.root(), &why), nullptr);
  EXPECT_EQ(why, "RAPL's intel-rapl:0's energy_uj could not be read (Is a directory)");
}

}  // namespace
}  // namespace torchutil::rapl
