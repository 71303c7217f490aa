#include "libtorch/Forward.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_set>

#include "libtorch/IValueArgs.h"

namespace torchutil {
namespace {

// The nodes of kind in block and in the blocks nested in it, in graph order.
void collectScriptNodes(torch::jit::Block* block, c10::Symbol kind,
                        std::vector<torch::jit::Node*>* out) {
  for (torch::jit::Node* n : block->nodes()) {
    if (n->kind() == kind) {
      out->push_back(n);
    }
    for (torch::jit::Block* nested : n->blocks()) {
      collectScriptNodes(nested, kind, out);
    }
  }
}

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

  ModelFacts modelFacts() override {
    std::unordered_set<const c10::TensorImpl*> seen;  // a parameter two submodules share, once
    double params = 0;
    for (const at::Tensor& p : module_.parameters()) {
      if (seen.insert(p.unsafeGetTensorImpl()).second) {
        params += static_cast<double>(p.numel());
      }
    }
    return {module_.type()->name()->name(), params, ""};
  }

  bool mayFork() override { return true; }

  // The profiled runs, and the one that builds the optimized graph.
  int64_t settlingForwards() override {
    return static_cast<int64_t>(torch::jit::getNumProfiledRuns().load()) + 1;
  }

  // torch.jit.optimize_for_inference rewrites convolutions into prim::mkldnn_convolution,
  // which the interpreter runs itself: no RecordFunction sees them. A copy of the graph that
  // also returns each one's arguments and output, run once, gives their shapes (the input's
  // comes from the run; the weight is a prim::ConstantMKLDNNTensor), and the registry prices
  // them by name. One inside control flow cannot be returned from the graph: then none is
  // priced and the FLOPs are NaN, the note saying how many there are.
  Unseen unseenWork(const std::vector<at::Tensor>& inputs) override {
    static const c10::Symbol kConv = c10::Symbol::fromQualString("prim::mkldnn_convolution");
    std::shared_ptr<torch::jit::Graph> graph = module_.get_method("forward").graph()->copy();
    std::vector<torch::jit::Node*> convs;
    collectScriptNodes(graph->block(), kConv, &convs);
    if (convs.empty()) {
      return {};
    }
    const auto nested = std::count_if(convs.begin(), convs.end(), [&](torch::jit::Node* n) {
      return n->owningBlock() != graph->block();
    });
    if (nested > 0) {
      return {{},
              std::to_string(convs.size()) +
                  " prim::mkldnn_convolution (torch.jit.optimize_for_inference's convolutions, "
                  "run by the TorchScript interpreter without the dispatcher) are not counted: " +
                  std::to_string(nested) +
                  " of them run inside control flow, where their shapes cannot be read"};
    }
    std::vector<torch::jit::Value*> returned(graph->outputs().begin(), graph->outputs().end());
    const size_t results = returned.size();
    for (torch::jit::Node* n : convs) {
      returned.insert(returned.end(), n->inputs().begin(), n->inputs().end());
      returned.push_back(n->output());
    }
    torch::jit::Node* tuple = graph->createTuple(returned);
    tuple->insertBefore(graph->return_node());
    while (!graph->outputs().empty()) {
      graph->eraseOutput(0);
    }
    graph->registerOutput(tuple->output());
    torch::jit::GraphFunction shapes("torchutil_unseen_convolutions", graph, nullptr);
    torch::jit::Stack stack{module_._ivalue()};
    stack.insert(stack.end(), inputs.begin(), inputs.end());
    {
      const at::DisableRecordFunctionGuard quiet;
      shapes.run(stack);
    }
    const auto& values = stack.back().toTupleRef().elements();
    Unseen unseen;
    size_t at = results;
    for (torch::jit::Node* n : convs) {
      const size_t args = n->inputs().size();
      std::vector<c10::IValue> in(values.begin() + static_cast<std::ptrdiff_t>(at),
                                  values.begin() + static_cast<std::ptrdiff_t>(at + args));
      at += args;
      unseen.calls.push_back(
          {n->kind().toQualString(), toArgs(in), toArgs(std::vector<c10::IValue>{values[at++]})});
    }
    return unseen;
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
