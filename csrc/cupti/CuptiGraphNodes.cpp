// CuptiTracer's graph-node correlation (Correlation::GraphNodes): a CUPTI callback subscriber for
// the capture's GRAPHNODE_CREATED and GRAPHNODE_CLONED callbacks, which tie each node to the
// innermost op open when it was created (OpMarking) and each executable node to the node it
// cloned. The subscriber is held only while the trace correlates.
#include <cupti.h>

#include <string>

#include "cupti/CuptiStatus.h"
#include "cupti/CuptiTracer.h"

namespace torchutil::cupti {
namespace {

constexpr CUpti_CallbackIdResource kGraphCallbacks[] = {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                                                        CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED};

}  // namespace

// Correlation::GraphNodes: CUPTI calls this on the thread that creates or clones a graph node.
// A node created on the tracing thread belongs to its innermost open op (the capture runs the
// counted forward there); instantiation clones each node into the executable graph, whose ids
// the replays' records carry.
void CUPTIAPI CuptiTracer::graphNodeCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                                             CUpti_CallbackId id, const void* data) {
  OpMarking& m = marking();
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || !m.owns()) {
    return;
  }
  const auto* graph = static_cast<const CUpti_GraphData*>(
      static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  uint64_t node = 0;
  if (graph == nullptr || cuptiGetGraphNodeId(graph->node, &node) != CUPTI_SUCCESS) {
    return;  // the node stays unknown: attributeByGraphNodes refuses and says so
  }
  if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    m.nodeCreated(node);
  } else if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    uint64_t original = 0;
    if (cuptiGetGraphNodeId(graph->originalNode, &original) == CUPTI_SUCCESS) {
      m.nodeCloned(node, original);
    }
  }
}

// One subscriber per process: another tool's (Kineto's, with its callbacks on) refuses ours,
// and the profile then correlates with markers instead.
bool CuptiTracer::startGraphNodes(std::string* why) {
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "torchutil";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof(holder);
  const CUptiResult status = cuptiSubscribe_v2(&subscriber_, graphNodeCallback, nullptr, &params);
  if (status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    // Kineto keeps its subscriber once torch.profiler has run in the process (it names none).
    const std::string name(holder);
    *why = "CUPTI has one callback subscriber per process and another client holds it" +
           (name.empty() || name.find("not provided") != std::string::npos
                ? std::string(" (torch.profiler's Kineto, once it has run here, or nsys/ncu)")
                : " (" + name + ")") +
           "; cuptiSubscribe_v2 failed (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)";
    return false;
  }
  if (status != CUPTI_SUCCESS) {
    *why = failure("cuptiSubscribe_v2", status);
    return false;
  }
  subscribed_ = true;
  for (CUpti_CallbackIdResource id : kGraphCallbacks) {
    TORCHUTIL_CUPTI_CHECK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, id), why);
  }
  marking().open(Correlation::GraphNodes, nullptr);
  return true;
}

// Disables the graph-node callbacks and unsubscribes; from release() too, so no failed or
// interrupted trace leaves a subscriber behind.
void CuptiTracer::unsubscribe() noexcept {
  if (!subscribed_) {
    return;
  }
  subscribed_ = false;
  for (CUpti_CallbackIdResource id : kGraphCallbacks) {
    TORCHUTIL_CUPTI_WARN(cuptiEnableCallback(0, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, id));
  }
  TORCHUTIL_CUPTI_WARN(cuptiUnsubscribe(subscriber_));
}

}  // namespace torchutil::cupti
