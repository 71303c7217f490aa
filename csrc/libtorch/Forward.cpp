#include "libtorch/Forward.h"

#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <atomic>
#include <chrono>
#include <mutex>

namespace torchutil {
namespace {

class ScriptForward final : public Forward {
 public:
  explicit ScriptForward(torch::jit::Module module) : module_(std::move(module)) {}

  void run(const std::vector<at::Tensor>& inputs) override {
    std::vector<c10::IValue> args(inputs.begin(), inputs.end());
    module_.forward(std::move(args));
  }

  std::optional<c10::Device> parameterDevice() override {
    for (const at::Tensor& p : module_.parameters()) {
      return p.device();
    }
    for (const at::Tensor& b : module_.buffers()) {
      return b.device();
    }
    return std::nullopt;
  }

  std::string describe() override { return "TorchScript module " + module_.type()->name()->name(); }

  bool mayFork() override { return true; }

  // The profiled runs, and the one that builds the optimized graph.
  int64_t settlingForwards() override {
    return static_cast<int64_t>(torch::jit::getNumProfiledRuns().load()) + 1;
  }

 private:
  torch::jit::Module module_;
};

std::mutex gFactoriesMutex;
std::vector<ForwardFactory>& factories() {
  static std::vector<ForwardFactory> f;
  return f;
}

}  // namespace

std::atomic<InterruptCheck> gInterruptCheck{nullptr};

void registerInterruptCheck(InterruptCheck check) {
  gInterruptCheck.store(check);
}

void checkInterrupt() {
  const InterruptCheck check = gInterruptCheck.load();
  if (check == nullptr) {
    return;
  }
  thread_local auto last = std::chrono::steady_clock::now();
  const auto now = std::chrono::steady_clock::now();
  if (now - last >= std::chrono::milliseconds(50)) {
    last = now;
    check();
  }
}

void registerForwardFactory(ForwardFactory factory) {
  std::lock_guard<std::mutex> lock(gFactoriesMutex);
  factories().push_back(factory);
}

std::unique_ptr<Forward> makeForward(const c10::IValue& model) {
  if (model.isObject() && model.toObjectRef().type()->is_module()) {
    return std::make_unique<ScriptForward>(torch::jit::Module(model.toObject()));
  }
  std::vector<ForwardFactory> copy;
  {
    std::lock_guard<std::mutex> lock(gFactoriesMutex);
    copy = factories();
  }
  for (ForwardFactory f : copy) {
    if (auto forward = f(model)) {
      return forward;
    }
  }
  TORCH_CHECK_TYPE(
      false, "torchutil: model must be an nn.Module, a TorchScript module or a callable, got ",
      model.tagKind(), model.isObject() ? " " + model.type()->str() : std::string());
  return nullptr;  // not reached: TORCH_CHECK_TYPE(false, ...) throws
}

}  // namespace torchutil
