#include "energy/NvmlEnergy.h"

#include <dlfcn.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

namespace torchutil::nvml {
namespace {

// dlsym as the entry point's type; false with *why when the library lacks it.
template <class Fn>
bool symbol(void* handle, const char* name, Fn* fn, std::string* why) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr) {
    *why = std::string("this libnvidia-ml has no ") + name + " (a driver older than NVML's call)";
    return false;
  }
  return true;
}

class Counter final : public EnergyCounter {
 public:
  Counter(std::shared_ptr<Library> library, Device device, std::string source)
      : lib_(std::move(library)), device_(device), source_(std::move(source)) {}

  std::string source() const override { return source_; }
  double wrapJoules() const override { return 0.0; }  // 64 bits of mJ

  bool read(EnergyReading* out, std::string* why) override {
    unsigned long long millijoules = 0;
    const double before = steadyClockSeconds();
    TORCHUTIL_NVML_CHECK(*lib_, nvmlDeviceGetTotalEnergyConsumption, (device_, &millijoules), why);
    // Stamped halfway through the call (it can take milliseconds): the windows' edges are
    // these stamps, and the forwards are counted at them.
    out->seconds = 0.5 * (before + steadyClockSeconds());
    out->joules = static_cast<double>(millijoules) * 1e-3;
    return true;
  }

  // Lists the compute processes on the GPU into seen_; false with *why_ when NVML cannot.
  bool listProcesses() {
    if (lib_->nvmlDeviceGetComputeRunningProcesses_v3 == nullptr) {
      listRefusal_ = "this libnvidia-ml cannot list the processes on the GPU";
      return false;
    }
    std::vector<ProcessInfo> infos(8);
    unsigned int count = static_cast<unsigned int>(infos.size());
    // A list longer than the room given answers kInsufficientSize with the length: try again.
    if (lib_->nvmlDeviceGetComputeRunningProcesses_v3(device_, &count, infos.data()) ==
        kInsufficientSize) {
      infos.resize(count + 8);
      count = static_cast<unsigned int>(infos.size());
    }
    TORCHUTIL_NVML_CHECK(*lib_, nvmlDeviceGetComputeRunningProcesses_v3,
                         (device_, &count, infos.data()), &listRefusal_);
    for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
      seen_.insert(infos[i].pid);
    }
    return true;
  }

  void started() override { listProcesses(); }  // those at the start; notes() adds the end's

  std::string notes() override {
    if (!listProcesses()) {
      return "the processes on the GPU are unknown: " + listRefusal_;
    }
    return otherProcessesNote(seen_, static_cast<unsigned>(getpid()));
  }

 private:
  std::shared_ptr<Library> lib_;
  Device device_;
  std::string source_;
  std::set<unsigned> seen_;
  std::string listRefusal_;
};

std::string pidList(const std::set<unsigned>& pids) {
  std::string text;
  size_t shown = 0;
  for (unsigned pid : pids) {
    if (shown == 3) {
      return text + ", ...";
    }
    text += (shown++ == 0 ? "" : ", ") + std::to_string(pid);
  }
  return text;
}

}  // namespace

std::shared_ptr<Library> Library::open(const std::string& path, std::string* why) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Library>> opened;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened.find(path); it != opened.end()) {
    return it->second;
  }
  // Kept open for the process: NVML's handles live as long as the library.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    *why = "NVML could not be loaded (" + std::string(error != nullptr ? error : path) +
           "); the NVIDIA driver installs " + kLibraryName;
    return nullptr;
  }
  auto lib = std::make_shared<Library>();
  InitFn init = nullptr;
  if (!symbol(handle, "nvmlInit_v2", &init, why) ||
      !symbol(handle, "nvmlErrorString", &lib->errorString_, why) ||
      !symbol(handle, "nvmlDeviceGetHandleByPciBusId_v2", &lib->nvmlDeviceGetHandleByPciBusId_v2,
              why) ||
      !symbol(handle, "nvmlDeviceGetTotalEnergyConsumption",
              &lib->nvmlDeviceGetTotalEnergyConsumption, why)) {
    dlclose(handle);
    return nullptr;
  }
  std::string ignored;
  symbol(handle, "nvmlDeviceGetComputeRunningProcesses_v3",
         &lib->nvmlDeviceGetComputeRunningProcesses_v3, &ignored);
  const Return status = init();
  if (status != kSuccess) {
    *why = lib->failure("nvmlInit_v2", status);
    dlclose(handle);
    return nullptr;
  }
  opened.emplace(path, lib);
  return lib;
}

std::string Library::failure(const char* call, Return status) const {
  const char* message = errorString_ != nullptr ? errorString_(status) : nullptr;
  return nvml::failure(call, status, message != nullptr ? message : "");
}

std::unique_ptr<EnergyCounter> openEnergyCounter(std::shared_ptr<Library> library,
                                                 const std::string& pciBusId,
                                                 const std::string& name, std::string* why) {
  const auto open = [&](Device* device) {
    TORCHUTIL_NVML_CHECK(*library, nvmlDeviceGetHandleByPciBusId_v2, (pciBusId.c_str(), device),
                         why);
    return true;
  };
  Device device = nullptr;
  if (!open(&device)) {
    return nullptr;
  }
  auto counter = std::make_unique<Counter>(
      std::move(library), device, "NVML total energy of " + name + " (PCI " + pciBusId + ")");
  EnergyReading first;
  if (!counter->read(&first, why)) {
    return nullptr;
  }
  return counter;
}

std::string otherProcessesNote(const std::set<unsigned>& pids, unsigned self) {
  if (pids.count(self) == 1) {
    std::set<unsigned> others = pids;
    others.erase(self);
    if (others.empty()) {
      return "";
    }
    return std::to_string(others.size()) + " other process" + (others.size() == 1 ? "" : "es") +
           " on the GPU (pid " + pidList(others) + "): its draw is in the figure";
  }
  if (pids.empty()) {
    return "NVML lists no process on the GPU (a container hides them), so other processes could "
           "not be seen";
  }
  // NVML names processes by the host's pids: in a container this process has another.
  return std::to_string(pids.size()) + " process" + (pids.size() == 1 ? "" : "es") +
         " on the GPU by NVML's pids (" + pidList(pids) + "), which do not include this one's " +
         std::to_string(self) +
         " (a container's pid namespace): " + std::to_string(pids.size() - 1) + " other" +
         (pids.size() == 2 ? "" : "s") + " if this process is among them";
}

}  // namespace torchutil::nvml
