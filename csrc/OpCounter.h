#pragma once
// Counts the ops of this thread through a thread-local RecordFunction callback (the dispatcher
// path: every op call, with its boxed inputs and outputs) into a CountSession.
#include <cstdint>
#include <string>

#include "core/CountSession.h"

namespace torchutil {

class OpCounter {
 public:
  // Starts counting on the calling thread. Throws if this thread already counts (profiles do
  // not nest) or if RecordFunction is disabled on it.
  static void begin();
  // Stops counting on this thread and returns what was counted. Throws if none was started.
  static CountTable end();
  // Stops counting if this thread counts; never throws. For error paths.
  static void abort() noexcept;
  static bool active();

  // Module scopes reported by module hooks; ignored when this thread does not count.
  static void enterModule(std::string path);
  static void exitModule();
  static std::string currentModule();

  // Callbacks registered by torchutil and not yet removed, over all threads (for tests: no
  // callback may survive a call).
  static int64_t liveCallbacks();
};

// Counts for its lifetime; the destructor aborts unless finish() was called.
class CountingScope {
 public:
  CountingScope() { OpCounter::begin(); }
  ~CountingScope() {
    if (!finished_) {
      OpCounter::abort();
    }
  }
  CountingScope(const CountingScope&) = delete;
  CountingScope& operator=(const CountingScope&) = delete;

  CountTable finish() {
    finished_ = true;
    return OpCounter::end();
  }

 private:
  bool finished_ = false;
};

}  // namespace torchutil
