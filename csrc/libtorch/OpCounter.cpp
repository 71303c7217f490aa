#include "libtorch/OpCounter.h"

#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "libtorch/IValueArgs.h"

namespace torchutil {
namespace {

struct ThreadState {
  std::unique_ptr<CountSession> session;
  const TraceHooks* hooks = nullptr;
  // Registry entries by the address of the op's name: RecordFunction names of dispatcher ops
  // are the schemas' own strings, so repeated calls skip hashing the name. The name is compared
  // too, since a name that is not a schema's may live in reused storage.
  struct CachedEntry {
    std::string name;
    const FormulaEntry* entry;
    bool isOperator;      // a dispatcher op, not a RecordFunction that marks a region of code
    bool compiledRegion;  // dynamo's mark around a compiled frame's code
    // The schema's argument and return counts (npos: unknown, or varargs). A boxed call
    // (Dispatcher::callBoxed, as TorchScript's interpreter makes) hands RecordFunction its
    // whole stack, whose leading values belong to the caller's frame: only the last ones are
    // the op's.
    size_t arguments = std::string::npos;
    size_t returns = std::string::npos;
  };
  std::unordered_map<const char*, CachedEntry> entries;
  // The registry's generation the cached entries belong to: a user's formula added or removed
  // between counts (never during one: the torch layer refuses) invalidates them.
  uint64_t registryGeneration = 0;
  at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;
  // Set by abandon() from another thread (a Profiler exited there): this thread removes its
  // callback at its next op or its next begin().
  std::shared_ptr<std::atomic<bool>> abandoned;
  int64_t token = 0;
  int64_t otherThreadCallsAtBegin = 0;
  int64_t compiledRegions = 0;

  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  // A thread that ends while it counts (a Profiler block never exited) drops its count here.
  ~ThreadState();
};

thread_local ThreadState tls;
std::atomic<int64_t> gLiveCallbacks{0};

// Forked work. at::launch and TorchScript's fork copy the thread-local state, callbacks
// included, to inter-op tasks, so the callback runs on threads that do not count. While one
// count runs in the process, such a thread counts into a child session of it, which end()
// merges; with several (whose forks cannot be told apart) its op calls are only reported.
struct ChildCount {
  std::mutex mutex;  // the task's thread counts while end() may merge (an unwaited fork)
  CountSession session;
};
struct ThreadChild {
  int64_t token = 0;  // the count it belongs to
  std::shared_ptr<ChildCount> count;
};
thread_local ThreadChild tlsChild;
std::atomic<int64_t> gSoleToken{0};  // token of the only running count; 0: none or several
std::atomic<int64_t> gOtherThreadCalls{0};

std::mutex gSessionsMutex;
int64_t gNextToken = 1;
std::unordered_map<int64_t, std::weak_ptr<std::atomic<bool>>> gSessions;
std::unordered_map<int64_t, std::vector<std::shared_ptr<ChildCount>>> gChildren;

void updateSoleToken() {  // under gSessionsMutex
  gSoleToken.store(gSessions.size() == 1 ? gSessions.begin()->first : 0);
}

ThreadState::~ThreadState() {
  // The callback itself lives in the thread's RecordFunction state, which the thread's exit
  // destroys too, possibly before this object: at::removeCallback must not be called here.
  if (handle != at::INVALID_CALLBACK_HANDLE) {
    gLiveCallbacks.fetch_sub(1);
  }
  if (abandoned != nullptr) {
    std::lock_guard<std::mutex> lock(gSessionsMutex);
    gSessions.erase(token);
    gChildren.erase(token);
    updateSoleToken();
  }
}

// The child count of this thread for the running count, created on first use; null when
// there is none to join (calls then go to gOtherThreadCalls).
ChildCount* childCount() {
  const int64_t token = gSoleToken.load(std::memory_order_relaxed);
  if (token == 0) {
    return nullptr;
  }
  if (tlsChild.token != token) {
    auto child = std::make_shared<ChildCount>();
    std::lock_guard<std::mutex> lock(gSessionsMutex);
    if (gSessions.count(token) == 0) {
      return nullptr;
    }
    gChildren[token].push_back(child);
    tlsChild = ThreadChild{token, std::move(child)};
  }
  return tlsChild.count.get();
}

void dropAbandoned() {
  if (tls.abandoned != nullptr && tls.abandoned->load(std::memory_order_relaxed)) {
    OpCounter::abort();
  }
}

const Args kNoOutputs;
// The name dynamo's RecordFunction around a compiled frame's code begins with (convert_frame.py's
// trace annotation, "Torch-Compiled Region: 0/0").
constexpr std::string_view kCompiledRegion = "Torch-Compiled Region";

bool anyPythonTensor(c10::ArrayRef<const c10::IValue> inputs) {
  for (const c10::IValue& v : inputs) {
    if (v.isTensor() && v.toTensor().defined() &&
        v.toTensor().key_set().has(c10::DispatchKey::Python)) {
      return true;
    }
  }
  return false;
}

// The last n of a boxed call's values (all of them where n is npos or not fewer).
c10::ArrayRef<const c10::IValue> ownValues(c10::ArrayRef<const c10::IValue> values, size_t n) {
  return n < values.size() ? values.slice(values.size() - n) : values;
}

void enterOp(CountSession* s, const at::RecordFunction& fn, const TraceHooks* hooks) {
  const char* name = fn.name();
  if (tls.registryGeneration != s->registry().generation()) {
    tls.entries.clear();
    tls.registryGeneration = s->registry().generation();
  }
  auto it = tls.entries.find(name);
  if (it == tls.entries.end() || it->second.name != name) {
    ThreadState::CachedEntry entry{name, s->registry().find(name), fn.operator_name().has_value(),
                                   std::string_view(name).starts_with(kCompiledRegion)};
    if (entry.isOperator) {
      const std::optional<c10::FunctionSchema> schema = fn.operator_schema();
      if (schema.has_value() && !schema->is_vararg() && !schema->is_varret()) {
        entry.arguments = schema->arguments().size();
        entry.returns = schema->returns().size();
      }
    }
    it = tls.entries.insert_or_assign(name, std::move(entry)).first;
  }
  if (it->second.compiledRegion) {
    ++tls.compiledRegions;
  }
  const bool counted = s->enter(name, it->second.entry);
  if (hooks != nullptr && hooks->push != nullptr && s->currentEvent() >= 0) {
    hooks->push(static_cast<uint64_t>(s->attributionEvent()) + 1);
  }
  if (s->topIsInside()) {
    return;  // most ops of a forward: an implementation detail of a counted op
  }
  // A RecordFunction without an operator marks code, not tensor work (torch.compile's
  // "TorchDynamo Cache Lookup"): neither counted nor reported; the ops inside follow the rules.
  if (!it->second.isOperator) {
    s->markOpaque();
    return;
  }
  // FakeTensor kernels run their meta implementation with Meta in the TLS include set; those
  // calls (during torch.compile tracing, say) are not work of the model.
  if (c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Meta)) {
    s->markOpaque();
    return;
  }
  const c10::ArrayRef<const c10::IValue> inputs = ownValues(fn.inputs(), it->second.arguments);
  // Nothing may leave this callback: RecordFunction would swallow the exception and skip the
  // op's exit, leaving its frame open and everything after it uncounted.
  try {
    if (!counted) {
      if (anyPythonTensor(inputs)) {
        s->markOpaque();
      } else if (it->second.entry == nullptr) {
        s->setInputs(toArgs(inputs).args);  // for rule 4: what its callees must account for
      }
      return;
    }
    if (inputs.empty()) {
      // The dispatcher boxes no inputs for ops whose arguments cannot be boxed.
      auto schema = fn.operator_schema();
      if (!schema.has_value() || !schema->arguments().empty()) {
        s->inputsUnavailable();
        return;
      }
    }
    ConvertedArgs args = toArgs(inputs);
    if (args.pythonTensor) {
      s->markOpaque();
    } else {
      s->setInputs(std::move(args.args));
    }
  } catch (const std::exception& e) {
    TORCH_WARN_ONCE("torchutil: could not read the inputs of ", name, " (", e.what(),
                    "); it is reported as unknown unless its callees price it");
    s->inputsUnavailable();
  }
}

void exitOp(CountSession* s, const at::RecordFunction& fn, const TraceHooks* hooks) {
  if (hooks != nullptr && hooks->pop != nullptr && s->currentEvent() >= 0) {
    hooks->pop();
  }
  if (s->topIsCounted()) {
    Args outputs;
    try {
      const auto it = tls.entries.find(fn.name());
      const size_t returns = it != tls.entries.end() ? it->second.returns : std::string::npos;
      const std::vector<c10::IValue>& all = fn.outputs();
      outputs =
          toArgs(ownValues(c10::ArrayRef<const c10::IValue>(all.data(), all.size()), returns)).args;
    } catch (const std::exception& e) {
      TORCH_WARN_ONCE("torchutil: could not read the outputs of ", fn.name(), " (", e.what(),
                      "); it is reported as unknown");
      s->inputsUnavailable();
    }
    s->exit(outputs);
  } else {
    s->exit(kNoOutputs);
  }
}

std::unique_ptr<at::ObserverContext> onEnter(const at::RecordFunction& fn) {
  CountSession* s = tls.session.get();
  if (s == nullptr) {
    // The callback was inherited by a thread that does not count: forked work.
    if (ChildCount* child = childCount()) {
      std::lock_guard<std::mutex> lock(child->mutex);
      enterOp(&child->session, fn, /*hooks=*/nullptr);
    } else if (fn.operator_name().has_value()) {
      gOtherThreadCalls.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  dropAbandoned();
  if (tls.session == nullptr) {
    return nullptr;  // abandoned from another thread: this op's exit finds no session either
  }
  enterOp(s, fn, tls.hooks);
  return nullptr;
}

void onExit(const at::RecordFunction& fn, at::ObserverContext* /*ctx*/) {
  CountSession* s = tls.session.get();
  if (s == nullptr) {
    if (tlsChild.count != nullptr && tlsChild.token == gSoleToken.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(tlsChild.count->mutex);
      exitOp(&tlsChild.count->session, fn, /*hooks=*/nullptr);
    }
    return;
  }
  exitOp(s, fn, tls.hooks);
}

}  // namespace

int64_t OpCounter::begin(const TraceHooks* hooks) {
  dropAbandoned();
  TORCH_CHECK(tls.session == nullptr,
              "torchutil: a profile is already counting on this thread; profiles cannot be "
              "nested (finish the outer torchutil.profile / torchutil.Profiler first)");
  TORCH_CHECK(at::isRecordFunctionEnabled(),
              "torchutil: RecordFunction is disabled on this thread "
              "(at::RecordFunctionGuard(false)), so no op can be seen");
  tls.session = std::make_unique<CountSession>();
  if (hooks != nullptr && hooks->clock != nullptr) {
    tls.session->recordEvents(hooks->clock);
    // Hooks without push and pop only time the ops (the CPU's: core/OpTimes.h).
    tls.hooks = hooks->push != nullptr && hooks->pop != nullptr ? hooks : nullptr;
  }
  try {
    at::RecordFunctionCallback cb(&onEnter, &onExit);
    cb.needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION});
    tls.handle = at::addThreadLocalCallback(cb);
    gLiveCallbacks.fetch_add(1);
  } catch (...) {
    tls.session.reset();
    throw;
  }
  tls.abandoned = std::make_shared<std::atomic<bool>>(false);
  tls.otherThreadCallsAtBegin = gOtherThreadCalls.load();
  tls.compiledRegions = 0;
  std::lock_guard<std::mutex> lock(gSessionsMutex);
  tls.token = gNextToken++;
  gSessions.emplace(tls.token, tls.abandoned);
  updateSoleToken();
  return tls.token;
}

bool OpCounter::abandon(int64_t token) {
  std::lock_guard<std::mutex> lock(gSessionsMutex);
  auto it = gSessions.find(token);
  if (it == gSessions.end()) {
    return false;
  }
  if (auto flag = it->second.lock()) {
    flag->store(true);
  }
  gSessions.erase(it);
  gChildren.erase(token);
  updateSoleToken();
  return true;
}

CountResult OpCounter::end() {
  TORCH_CHECK(tls.session != nullptr, "torchutil: no count is running on this thread");
  CountResult result{tls.session->table(), tls.session->events()};
  std::vector<std::shared_ptr<ChildCount>> children;
  {
    std::lock_guard<std::mutex> lock(gSessionsMutex);
    auto it = gChildren.find(tls.token);
    if (it != gChildren.end()) {
      children = std::move(it->second);
      gChildren.erase(it);
    }
  }
  for (const auto& child : children) {
    std::lock_guard<std::mutex> lock(child->mutex);
    result.table.merge(child->session.table());
  }
  result.otherThreads = static_cast<int64_t>(children.size());
  result.compiledRegions = tls.compiledRegions;
  result.table.setOtherThreadCalls(gOtherThreadCalls.load() - tls.otherThreadCallsAtBegin);
  abort();
  return result;
}

void OpCounter::abort() noexcept {
  if (tls.handle != at::INVALID_CALLBACK_HANDLE) {
    at::removeCallback(tls.handle);
    tls.handle = at::INVALID_CALLBACK_HANDLE;
    gLiveCallbacks.fetch_sub(1);
  }
  tls.session.reset();
  tls.hooks = nullptr;
  if (tls.abandoned != nullptr) {
    tls.abandoned.reset();
    std::lock_guard<std::mutex> lock(gSessionsMutex);
    gSessions.erase(tls.token);
    gChildren.erase(tls.token);
    updateSoleToken();
  }
}

bool OpCounter::active() {
  dropAbandoned();
  return tls.session != nullptr;
}

void OpCounter::enterModule(std::string_view path) {
  if (tls.session != nullptr) {
    tls.session->enterModule(path);
  }
}

void OpCounter::exitModule() {
  if (tls.session != nullptr) {
    tls.session->exitModule();
  }
}

std::string OpCounter::currentModule() {
  return tls.session != nullptr ? tls.session->currentModule() : std::string();
}

int64_t OpCounter::liveCallbacks() {
  return gLiveCallbacks.load();
}

}  // namespace torchutil
