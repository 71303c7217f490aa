// A stand-in for libnvidia-ml.so.1, built as a shared library and loaded by the code under test
// the way the driver's is (dlopen, dlsym), with the entry points torchutil calls. Its types are
// nvml.h's (driver 580), written here from that header, not from torchutil's copy. A test sets
// its answers through fakeNvml(), found with dlsym on the same library.
#include <cstring>

extern "C" {

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

struct FakeNvml {
  int initStatus;                  // nvmlReturn_t of nvmlInit_v2
  int handleStatus;                // of nvmlDeviceGetHandleByPciBusId_v2
  int energyStatus;                // of nvmlDeviceGetTotalEnergyConsumption
  int processStatus;               // of nvmlDeviceGetComputeRunningProcesses_v3
  unsigned long long millijoules;  // the counter; every read adds stepMillijoules
  unsigned long long stepMillijoules;
  unsigned int pids[16];
  unsigned int pidCount;
  char busId[64];  // the bus id asked for last
  int inits;
  int energyReads;
};

static FakeNvml fake;
static int device;  // what a handle points to

__attribute__((visibility("default"))) FakeNvml* fakeNvml() {
  return &fake;
}

__attribute__((visibility("default"))) int nvmlInit_v2() {
  ++fake.inits;
  return fake.initStatus;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int status) {
  switch (status) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* busId,
                                                                            void** handle) {
  std::strncpy(fake.busId, busId, sizeof(fake.busId) - 1);
  if (fake.handleStatus != 0) {
    return fake.handleStatus;
  }
  *handle = &device;
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTotalEnergyConsumption(
    void* handle, unsigned long long* millijoules) {
  ++fake.energyReads;
  if (handle != &device) {
    return 2;  // NVML_ERROR_INVALID_ARGUMENT
  }
  if (fake.energyStatus != 0) {
    return fake.energyStatus;
  }
  fake.millijoules += fake.stepMillijoules;
  *millijoules = fake.millijoules;
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(
    void* handle, unsigned int* count, nvmlProcessInfo_t* infos) {
  if (handle != &device) {
    return 2;
  }
  if (fake.processStatus != 0) {
    return fake.processStatus;
  }
  if (*count < fake.pidCount) {
    *count = fake.pidCount;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  for (unsigned int i = 0; i < fake.pidCount; ++i) {
    infos[i] = nvmlProcessInfo_t{fake.pids[i], 1u << 20, 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  *count = fake.pidCount;
  return 0;
}

}  // extern "C"
