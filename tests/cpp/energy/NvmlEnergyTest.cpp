// NVML's energy counter (energy/NvmlEnergy.h) on a stand-in libnvidia-ml (FakeNvml.cpp), loaded
// at run time as the driver's is: the entry points found by name, the GPU found by its PCI bus
// id, NVML's statuses turned into the sentences a user reads, the processes on the GPU named.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "energy/NvmlEnergy.h"

namespace torchutil::nvml {
namespace {

// FakeNvml.cpp's state (its struct, as that file declares it).
struct FakeNvml {
  int initStatus, handleStatus, energyStatus, processStatus;
  unsigned long long millijoules, stepMillijoules;
  unsigned int pids[16];
  unsigned int pidCount;
  char busId[64];
  int inits, energyReads;
};

// A copy of the stand-in library of its own (a file of its own is loaded apart, with its own
// state), and that state.
struct FakeLibrary {
  std::string path;
  FakeNvml* state = nullptr;

  explicit FakeLibrary(const std::string& tag) {
    path = (std::filesystem::temp_directory_path() /
            ("torchutil-fake-nvml-" + std::to_string(getpid()) + "-" + tag + ".so"))
               .string();
    std::filesystem::copy_file(TORCHUTIL_FAKE_NVML, path,
                               std::filesystem::copy_options::overwrite_existing);
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    state = reinterpret_cast<FakeNvml* (*)()>(dlsym(handle, "fakeNvml"))();
  }
};

constexpr const char* kBusId = "00000000:19:00.0";

TEST(NvmlEnergyTest, ReadsTheCounterOfTheGpuAtTheBusId) {
  FakeLibrary fake("read");
  fake.state->millijoules = 10'000'000;
  fake.state->stepMillijoules = 1500;
  std::string why;
  std::shared_ptr<Library> lib = Library::open(fake.path, &why);
  ASSERT_NE(lib, nullptr) << why;
  EXPECT_EQ(Library::open(fake.path, &why), lib);  // once per process
  EXPECT_EQ(fake.state->inits, 1);
  std::unique_ptr<EnergyCounter> counter = openEnergyCounter(lib, kBusId, "cuda:0", &why);
  ASSERT_NE(counter, nullptr) << why;
  EXPECT_STREQ(fake.state->busId, kBusId);
  EXPECT_EQ(counter->source(), "NVML total energy of cuda:0 (PCI 00000000:19:00.0)");
  EXPECT_EQ(counter->wrapJoules(), 0.0);
  EnergyReading r;
  ASSERT_TRUE(counter->read(&r, &why)) << why;
  EXPECT_DOUBLE_EQ(r.joules, 10'003.0);  // mJ to J: the open read once, this is the second
  const double now = steadyClockSeconds();
  EXPECT_LE(r.seconds, now);
  EXPECT_GT(r.seconds, now - 10.0);
}

TEST(NvmlEnergyTest, StatusesBecomeSentences) {
  FakeLibrary fake("status");
  std::string why;
  std::shared_ptr<Library> lib = Library::open(fake.path, &why);
  ASSERT_NE(lib, nullptr) << why;
  fake.state->energyStatus = 3;
  EXPECT_EQ(openEnergyCounter(lib, kBusId, "cuda:0", &why), nullptr);
  EXPECT_EQ(why,
            "this GPU has no total-energy counter (NVML's needs a Volta or newer GPU; virtual GPUs "
            "and some MIG slices hide it). nvmlDeviceGetTotalEnergyConsumption failed (Not "
            "Supported)");
  fake.state->energyStatus = 4;
  EXPECT_EQ(openEnergyCounter(lib, kBusId, "cuda:0", &why), nullptr);
  EXPECT_EQ(why,
            "no permission to read the GPU's energy through NVML. "
            "nvmlDeviceGetTotalEnergyConsumption failed (Insufficient Permissions)");
  fake.state->energyStatus = 0;
  fake.state->handleStatus = 6;
  EXPECT_EQ(openEnergyCounter(lib, kBusId, "cuda:0", &why), nullptr);
  EXPECT_EQ(why, "nvmlDeviceGetHandleByPciBusId_v2 failed (Not Found)");
  // A read that fails later says so through the counter, as the windows' refusal.
  fake.state->handleStatus = 0;
  std::unique_ptr<EnergyCounter> counter = openEnergyCounter(lib, kBusId, "cuda:0", &why);
  ASSERT_NE(counter, nullptr) << why;
  fake.state->energyStatus = 15;
  EnergyReading r;
  EXPECT_FALSE(counter->read(&r, &why));
  EXPECT_EQ(why.rfind("the GPU has fallen off the bus. nvmlDeviceGetTotalEnergyConsumption failed "
                      "(Unknown Error)",
                      0),
            0u)
      << why;
}

TEST(NvmlEnergyTest, InitFailureAndMissingLibraryAreRefused) {
  FakeLibrary fake("init");
  fake.state->initStatus = 9;
  std::string why;
  EXPECT_EQ(Library::open(fake.path, &why), nullptr);
  EXPECT_EQ(why,
            "the NVIDIA driver is not loaded, or does not match its libnvidia-ml. nvmlInit_v2 "
            "failed (Driver Not Loaded)");
  fake.state->initStatus = 0;
  EXPECT_NE(Library::open(fake.path, &why), nullptr) << why;  // a failure is not kept
  EXPECT_EQ(Library::open("/nonexistent/libnvidia-ml.so.1", &why), nullptr);
  EXPECT_EQ(why.rfind("NVML could not be loaded (/nonexistent/libnvidia-ml.so.1: cannot open", 0),
            0u)
      << why;
  EXPECT_NE(why.find("the NVIDIA driver installs libnvidia-ml.so.1"), std::string::npos);
}

TEST(NvmlEnergyTest, NotesNameOtherProcessesOnTheGpu) {
  FakeLibrary fake("processes");
  std::string why;
  std::shared_ptr<Library> lib = Library::open(fake.path, &why);
  ASSERT_NE(lib, nullptr) << why;
  const unsigned self = static_cast<unsigned>(getpid());
  fake.state->pids[0] = self;
  fake.state->pidCount = 1;
  std::unique_ptr<EnergyCounter> alone = openEnergyCounter(lib, kBusId, "cuda:0", &why);
  ASSERT_NE(alone, nullptr) << why;
  EXPECT_EQ(alone->notes(), "");
  // A process seen once the forwards started and gone at the end still counts; one there only
  // at the open (before started()) does not. The list outgrows the room first given (NVML
  // answers "insufficient size" with the length).
  fake.state->pids[1] = 4000;
  fake.state->pidCount = 2;
  std::unique_ptr<EnergyCounter> shared = openEnergyCounter(lib, kBusId, "cuda:0", &why);
  fake.state->pids[1] = 4242;
  shared->started();
  for (unsigned i = 0; i < 12; ++i) {
    fake.state->pids[i] = i == 0 ? self : 5000 + i;
  }
  fake.state->pidCount = 12;
  EXPECT_EQ(shared->notes(),
            "12 other processes on the GPU (pid 4242, 5001, 5002, ...): its draw is in the figure");
  fake.state->processStatus = 4;
  EXPECT_EQ(shared->notes(),
            "the processes on the GPU are unknown: no permission to read the GPU's energy through "
            "NVML. nvmlDeviceGetComputeRunningProcesses_v3 failed (Insufficient Permissions)");
}

TEST(NvmlEnergyTest, OtherProcessesNote) {
  EXPECT_EQ(otherProcessesNote({7}, 7), "");
  EXPECT_EQ(otherProcessesNote({7, 9}, 7),
            "1 other process on the GPU (pid 9): its draw is in the figure");
  EXPECT_EQ(otherProcessesNote({}, 7),
            "NVML lists no process on the GPU (a container hides them), so other processes could "
            "not be seen");
  EXPECT_EQ(otherProcessesNote({120, 130}, 7),
            "2 processes on the GPU by NVML's pids (120, 130), which do not include this one's 7 "
            "(a container's pid namespace): 1 other if this process is among them");
}

}  // namespace
}  // namespace torchutil::nvml
