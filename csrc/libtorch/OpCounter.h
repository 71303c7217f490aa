#pragma once
// Counts the ops of this thread through a thread-local RecordFunction callback (the dispatcher
// path: every op call, with its boxed inputs and outputs) into a CountSession.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/CountSession.h"
#include "core/HardwareBackends.h"  // TraceHooks

namespace torchutil {

struct CountResult {
  CountTable table;
  std::vector<OpEvent> events;  // empty unless counting ran with TraceHooks
  // Threads other than the counting one that ran ops of the count (TorchScript's fork on the
  // inter-op pool): work a CUDA graph capture of this thread's stream would not hold.
  int64_t otherThreads = 0;
  // torch.compile'd frames the forward ran (dynamo's "Torch-Compiled Region" RecordFunctions):
  // code whose generated kernels the dispatcher never sees.
  int64_t compiledRegions = 0;
};

class OpCounter {
 public:
  // Starts counting on the calling thread. Throws if this thread already counts (profiles do
  // not nest) or if RecordFunction is disabled on it. hooks (optional) must outlive the count;
  // with a clock, each op call is an OpEvent timed on it; push and pop may be null (the events
  // are then kept without tracing anything).
  // Returns a token that abandon() takes.
  static int64_t begin(const TraceHooks* hooks = nullptr);
  // From any thread: the count begun with token is dropped, and its thread removes its
  // callback at its next op (or its next begin() / active()). A Profiler exited on another
  // thread than it entered cannot remove a thread-local callback itself. False if no such
  // count runs.
  static bool abandon(int64_t token);
  // Stops counting on this thread and returns what was counted. Throws if none was started.
  static CountResult end();
  // Stops counting if this thread counts; never throws. For error paths.
  static void abort() noexcept;
  static bool active();

  // Module scopes reported by the module-path scopes (csrc/python); ignored when this thread
  // does not count.
  static void enterModule(std::string_view path);
  static void exitModule();
  static std::string currentModule();

  // Callbacks registered by torchutil and not yet removed, over all threads (for tests: no
  // callback may survive a call).
  static int64_t liveCallbacks();
};

// Counts for its lifetime; the destructor aborts unless finish() was called.
class CountingScope {
 public:
  explicit CountingScope(const TraceHooks* hooks = nullptr) { OpCounter::begin(hooks); }
  ~CountingScope() {
    if (!finished_) {
      OpCounter::abort();
    }
  }
  CountingScope(const CountingScope&) = delete;
  CountingScope& operator=(const CountingScope&) = delete;

  CountResult finish() {
    finished_ = true;
    return OpCounter::end();
  }

 private:
  bool finished_ = false;
};

}  // namespace torchutil
