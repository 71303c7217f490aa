#pragma once
// CUPTI's profiler host (cupti_profiler_host.h), what the range profiler and the PM sampler
// share: the profiler library, initialized for an object's lifetime; the chip; and the host
// object that builds configurations from metric names and evaluates counter data into values.
// Built only with TORCHUTIL_WITH_CUPTI; torch-free.
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/HardwareBackends.h"

namespace torchutil::cupti {

// The profiler library (cuptiProfilerInitialize), deinitialized by the destructor.
class ProfilerLibrary {
 public:
  ProfilerLibrary() = default;
  ~ProfilerLibrary();
  ProfilerLibrary(const ProfilerLibrary&) = delete;
  ProfilerLibrary& operator=(const ProfilerLibrary&) = delete;
  bool initialize(std::string* why);

 private:
  bool initialized_ = false;
};

// The chip name of device deviceIndex ("GH100").
bool chipName(int deviceIndex, std::string* name, std::string* why);

// The C strings CUPTI's metric-name arrays take; they point into `names`, which must outlive them.
std::vector<const char*> cStrings(const std::vector<std::string>& names);

// The host object that builds config images and evaluates counter data; released when it goes
// (or by init, which starts a fresh one).
class HostObject {
 public:
  bool init(CUpti_ProfilerType type, const std::string& chip, const std::vector<uint8_t>& avail,
            std::string* why);
  bool knows(const std::string& metric) const;
  bool addMetrics(const std::vector<std::string>& names, std::string* why);
  bool configImage(std::vector<uint8_t>* image, size_t* passes, std::string* why);
  bool evaluate(const std::vector<uint8_t>& counterData, size_t index,
                const std::vector<std::string>& names, std::vector<double>* values,
                std::string* why) const;

 private:
  struct Deinitialize {
    void operator()(CUpti_Profiler_Host_Object* host) const noexcept;
  };
  std::unique_ptr<CUpti_Profiler_Host_Object, Deinitialize> host_;
};

// The CounterHostApi part of both profilers (Api: hw::RangeProfilerApi or hw::PmSamplerApi), on
// a host object of one profiler type, and the counter data image the profiler fills. The derived
// class's destructor disables its profiler or sampler first; then the image is freed (CUPTI
// points into it until then), the host object released and the profiler library deinitialized.
template <class Api>
class ProfilerHost : public Api {
 public:
  explicit ProfilerHost(CUpti_ProfilerType type) : type_(type) {}

  std::string chip() const override { return chip_; }
  bool knows(const std::string& metric) const override { return host_.knows(metric); }
  bool accepts(const std::string& metric) override {
    HostObject scratch;
    std::string ignored;
    return scratch.init(type_, chip_, availability_, &ignored) &&
           scratch.addMetrics({metric}, &ignored);
  }
  bool addMetrics(const std::vector<std::string>& metrics, std::string* why) override {
    // A host object takes one configuration: a new one starts on a fresh object.
    if (configured_ && !host_.init(type_, chip_, availability_, why)) {
      return false;
    }
    configured_ = true;
    metrics_ = metrics;
    return host_.addMetrics(metrics_, why);
  }
  bool buildConfig(size_t* passes, std::string* why) override {
    return host_.configImage(&config_, passes, why);
  }

 protected:
  // open()'s first step: the profiler library and the chip of device deviceIndex.
  bool initialize(int deviceIndex, std::string* why) {
    return library_.initialize(why) && chipName(deviceIndex, &chip_, why);
  }
  // open()'s last step: the host object for the chip's counters as `availability` has them.
  bool openHost(std::vector<uint8_t> availability, std::string* why) {
    availability_ = std::move(availability);
    return host_.init(type_, chip_, availability_, why);
  }
  const std::vector<uint8_t>& config() const { return config_; }
  const std::vector<std::string>& metrics() const { return metrics_; }
  std::vector<uint8_t>& counterData() { return counterData_; }
  // The configured metrics' values of range or sample `index` of the counter data image.
  bool evaluate(size_t index, std::vector<double>* values, std::string* why) const {
    return host_.evaluate(counterData_, index, metrics_, values, why);
  }

 private:
  ProfilerLibrary library_;  // first: released last
  CUpti_ProfilerType type_;
  std::string chip_;
  std::vector<uint8_t> availability_;
  HostObject host_;
  bool configured_ = false;
  std::vector<std::string> metrics_;
  std::vector<uint8_t> config_;
  std::vector<uint8_t> counterData_;  // last: freed first, after the derived class disabled CUPTI
};

}  // namespace torchutil::cupti
