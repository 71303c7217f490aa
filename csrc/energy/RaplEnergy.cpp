#include "energy/RaplEnergy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

namespace torchutil::rapl {
namespace {

namespace fs = std::filesystem;

// One package's energy_uj, open for the counter's life; read again from its start each time.
struct Domain {
  std::string name;  // "package-0"
  int fd = -1;
  double wrapJoules = 0.0;
  double lastJoules = 0.0;
};

bool readMicrojoules(int fd, const std::string& path, double* joules, std::string* why) {
  char text[32] = {};
  const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  char* end = nullptr;
  const unsigned long long uj = n > 0 ? std::strtoull(text, &end, 10) : 0;
  if (n <= 0 || end == text) {
    *why = "RAPL's " + path + " could not be read (" +
           (n < 0 ? std::string(std::strerror(errno)) : "no number in it") + ")";
    return false;
  }
  *joules = static_cast<double>(uj) * 1e-6;
  return true;
}

class Counter final : public EnergyCounter {
 public:
  Counter(std::vector<Domain> domains, std::string root)
      : domains_(std::move(domains)), root_(std::move(root)) {}
  ~Counter() override {
    for (const Domain& d : domains_) {
      close(d.fd);
    }
  }

  std::string source() const override {
    std::string names;
    for (const Domain& d : domains_) {
      names += (names.empty() ? "" : " + ") + d.name;
    }
    return "RAPL energy of " + names + " (" + root_ + "; the whole package, every process on it)";
  }
  double wrapJoules() const override { return 0.0; }  // each domain is unwrapped as it is read

  // The first read sets each domain's origin.
  bool read(EnergyReading* out, std::string* why) override {
    for (Domain& d : domains_) {
      double joules = 0.0;
      if (!readMicrojoules(d.fd, d.name + "'s energy_uj", &joules, why)) {
        return false;
      }
      if (started_) {
        const double delta = counterDelta(d.lastJoules, joules, d.wrapJoules);
        total_ += std::max(delta, 0.0);
      }
      d.lastJoules = joules;
    }
    started_ = true;
    out->joules = total_;
    out->seconds = steadyClockSeconds();
    return true;
  }

 private:
  std::vector<Domain> domains_;
  std::string root_;
  bool started_ = false;
  double total_ = 0.0;
};

std::string firstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::unique_ptr<EnergyCounter> openEnergyCounter(const std::string& root, std::string* why) {
  std::error_code ec;
  std::vector<fs::path> tops;
  static const std::regex kTop("intel-rapl:[0-9]+");
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (std::regex_match(it->path().filename().string(), kTop)) {
      tops.push_back(it->path());
    }
  }
  if (tops.empty()) {
    *why = "no RAPL domain under " + root + (ec ? " (" + ec.message() + ")" : std::string()) +
           ": a CPU's energy is read from Linux's powercap files (the intel_rapl driver), which "
           "this machine or container does not have";
    return nullptr;
  }
  std::sort(tops.begin(), tops.end());
  std::vector<Domain> domains;
  for (const fs::path& top : tops) {
    Domain d;
    d.name = firstLine(top / "name");
    if (d.name.empty()) {
      d.name = top.filename().string();
    }
    const std::string energy = (top / "energy_uj").string();
    d.fd = ::open(energy.c_str(), O_RDONLY | O_CLOEXEC);
    if (d.fd < 0) {
      const int error = errno;
      *why = "RAPL's " + energy + " cannot be read (" + std::strerror(error) + ")" +
             (error == EACCES ? ": Linux lets only root read it (since 5.10, CVE-2020-8694)" : "");
      for (const Domain& open : domains) {
        close(open.fd);
      }
      return nullptr;
    }
    d.wrapJoules = std::strtod(firstLine(top / "max_energy_range_uj").c_str(), nullptr) * 1e-6;
    domains.push_back(std::move(d));
  }
  auto counter = std::make_unique<Counter>(std::move(domains), root);
  EnergyReading first;
  if (!counter->read(&first, why)) {
    return nullptr;
  }
  return counter;
}

}  // namespace torchutil::rapl
