#pragma once
// What torchutil runs: one forward of a model over fixed inputs. The dispatcher carries the
// model as a c10::IValue; makeForward() turns it into a Forward, trying TorchScript modules
// first and then the factories other parts register (the Python binding registers one for
// util.PyModule, the box around an eager Python callable).
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/CompiledAttribution.h"
#include "core/CountSession.h"
#include "core/NotANumber.h"

namespace torchutil {

// What a result says of the model itself: its model, params and params_note fields.
struct ModelFacts {
  std::string name;      // the model's class name ("" where no model was given)
  double params = kNaN;  // its parameters' elements, each shared parameter once; NaN: note says why
  std::string note;      // why params is NaN ("" when it is not)
};

class Forward {
 public:
  virtual ~Forward() = default;
  // Runs the model once on inputs and drops the result.
  virtual void run(const std::vector<at::Tensor>& inputs) = 0;
  // Device of the model's first parameter (else buffer), if it has any.
  virtual std::optional<c10::Device> parameterDevice() = 0;
  // Short description for messages ("TorchScript module ResNet", "Python callable ...").
  virtual std::string describe() = 0;
  // The model's class name and parameter count (nn.Module.named_parameters(): every parameter,
  // trainable or not, a shared one once; a compiled module's through the module it compiled).
  virtual ModelFacts modelFacts() = 0;
  // Whether forwards are compiled code that runs ops out of sight of module paths.
  virtual bool compiled() { return false; }
  // Runs the model once as eager PyTorch, for the count: torch.compile'd code (a compiled
  // module, or compiled functions a model calls) runs its own eager code, so that every op
  // passes the dispatcher; the compiled code is left as it was (no recompilation). run() for
  // forwards that compile nothing.
  virtual void runEager(const std::vector<at::Tensor>& inputs) { run(inputs); }
  // Whether a forward may run ops on other threads (TorchScript's fork runs on the inter-op
  // pool; an eager Python fork runs inline): a profile then counts it eagerly before trying a
  // CUDA-graph capture, which would not hold that work.
  virtual bool mayFork() { return false; }
  // Forwards that run before the model reaches its steady state, never the counted one:
  // TorchScript's profiling executor instruments its first runs (a frozen model's first run
  // checks its constants: hundreds of aten::equal) and optimizes the graph after them.
  virtual int64_t settlingForwards() { return 0; }
  // Work the forward runs out of the dispatcher's sight: calls priced from what the model says
  // of them (calls), and where that cannot be done, why its FLOPs cannot be counted
  // (uncounted, one line: the profile's FLOPs are then NaN and flops_note says why, never a
  // silent part of them). May run forwards of its own, with RecordFunction off; called outside
  // any count.
  struct Unseen {
    std::vector<UnseenCall> calls;
    std::string uncounted;
  };
  virtual Unseen unseenWork(const std::vector<at::Tensor>& /*inputs*/) { return {}; }
  // The kernels Inductor generates for the compiled code the forwards run, and the ops each
  // fused (torchutil/_inductor.py): recording starts before the warm-ups, where that code
  // compiles, and generatedKernels() ends it. Call generatedKernels() outside any count.
  virtual void recordGeneratedKernels() {}
  virtual GeneratedKernels generatedKernels() { return {}; }

  // Reports module entries and exits to OpCounter until close() (or its destruction, which
  // closes quietly where close() did not run: while an exception unwinds).
  class ModuleScope {
   public:
    virtual ~ModuleScope() = default;
    // Ends the tracking; throws what ending it raised (a KeyboardInterrupt pending there).
    virtual void close() {}
  };
  virtual std::unique_ptr<ModuleScope> trackModules() { return nullptr; }
};

using ForwardFactory = std::unique_ptr<Forward> (*)(const c10::IValue& model);
void registerForwardFactory(ForwardFactory factory);

// Between forwards of a long loop: calls the registered check (the Python binding registers
// one that raises KeyboardInterrupt on a pending Ctrl-C) at most every 50 ms, so that a timing
// loop of a TorchScript model, which never enters Python, still stops promptly.
using InterruptCheck = void (*)();
void registerInterruptCheck(InterruptCheck check);
void checkInterrupt();

// Throws c10::TypeError naming what model is when nothing can run it.
std::unique_ptr<Forward> makeForward(const c10::IValue& model);

}  // namespace torchutil
