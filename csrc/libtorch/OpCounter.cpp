#include "libtorch/OpCounter.h"

#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
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
    bool isOperator;  // a dispatcher op, not a RecordFunction that marks a region of code
  };
  std::unordered_map<const char*, CachedEntry> entries;
  at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;
};

thread_local ThreadState tls;
std::atomic<int64_t> gLiveCallbacks{0};

const Args kNoOutputs;

bool anyPythonTensor(c10::ArrayRef<const c10::IValue> inputs) {
  for (const c10::IValue& v : inputs) {
    if (v.isTensor() && v.toTensor().defined() &&
        v.toTensor().key_set().has(c10::DispatchKey::Python)) {
      return true;
    }
  }
  return false;
}

std::unique_ptr<at::ObserverContext> onEnter(const at::RecordFunction& fn) {
  CountSession* s = tls.session.get();
  if (s == nullptr) {
    return nullptr;  // the callback was inherited by a thread that does not count
  }
  const char* name = fn.name();
  auto it = tls.entries.find(name);
  if (it == tls.entries.end() || it->second.name != name) {
    const ThreadState::CachedEntry entry{name, s->registry().find(name),
                                         fn.operator_name().has_value()};
    it = tls.entries.insert_or_assign(name, entry).first;
  }
  const bool counted = s->enter(name, it->second.entry);
  if (tls.hooks != nullptr && s->currentEvent() >= 0) {
    tls.hooks->push(static_cast<uint64_t>(s->currentEvent()) + 1);
  }
  if (s->topIsInside()) {
    return nullptr;  // most ops of a forward: an implementation detail of a counted op
  }
  // A RecordFunction without an operator marks code, not tensor work (torch.compile's
  // "TorchDynamo Cache Lookup"): neither counted nor reported; the ops inside follow the rules.
  if (!it->second.isOperator) {
    s->markOpaque();
    return nullptr;
  }
  // FakeTensor kernels run their meta implementation with Meta in the TLS include set; those
  // calls (during torch.compile tracing, say) are not work of the model.
  if (c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Meta)) {
    s->markOpaque();
    return nullptr;
  }
  const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  if (!counted) {
    if (anyPythonTensor(inputs)) {
      s->markOpaque();
    }
    return nullptr;
  }
  if (inputs.empty()) {
    // The dispatcher boxes no inputs for ops whose arguments cannot be boxed.
    auto schema = fn.operator_schema();
    if (!schema.has_value() || !schema->arguments().empty()) {
      s->inputsUnavailable();
      return nullptr;
    }
  }
  ConvertedArgs args = toArgs(inputs);
  if (args.pythonTensor) {
    s->markOpaque();
  } else {
    s->setInputs(std::move(args.args));
  }
  return nullptr;
}

void onExit(const at::RecordFunction& fn, at::ObserverContext* /*ctx*/) {
  CountSession* s = tls.session.get();
  if (s == nullptr) {
    return;
  }
  if (tls.hooks != nullptr && s->currentEvent() >= 0) {
    tls.hooks->pop();
  }
  if (s->topIsCounted()) {
    s->exit(toArgs(fn.outputs()));
  } else {
    s->exit(kNoOutputs);
  }
}

}  // namespace

void OpCounter::begin(const TraceHooks* hooks) {
  TORCH_CHECK(tls.session == nullptr,
              "torchutil: a profile is already counting on this thread; profiles cannot be "
              "nested (finish the outer torchutil.profile / torchutil.Profiler first)");
  TORCH_CHECK(at::isRecordFunctionEnabled(),
              "torchutil: RecordFunction is disabled on this thread "
              "(at::RecordFunctionGuard(false)), so no op can be seen");
  tls.session = std::make_unique<CountSession>();
  if (hooks != nullptr && hooks->clock != nullptr) {
    tls.session->recordEvents(hooks->clock);
    tls.hooks = hooks;
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
}

CountResult OpCounter::end() {
  TORCH_CHECK(tls.session != nullptr, "torchutil: no count is running on this thread");
  CountResult result{tls.session->table(), tls.session->events()};
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
}

bool OpCounter::active() {
  return tls.session != nullptr;
}

void OpCounter::enterModule(std::string path) {
  if (tls.session != nullptr) {
    tls.session->enterModule(std::move(path));
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
