#include "libtorch/Profile.h"

#include "core/HwResult.h"
#include "core/KernelTrace.h"
#include "core/Metrics.h"

// A profile's output as named tables and texts (the schema's fields): what the ops and Python
// read.
namespace torchutil {

void nameTables(const ProfileOutput& out, NamedResult* r) {
  const auto& rows = out.table.rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool traced = out.traced && i < out.trace.perRow.size();
    const OpKernelStats* time = traced                      ? &out.trace.perRow[i]
                                : i < out.cpuOpTimes.size() ? &out.cpuOpTimes[i]
                                                            : nullptr;
    addOpRow(r->ops, rows[i], time, out.peak.flopsPerSecond, out.bandwidth.bytesPerSecond);
  }
  for (const auto& [op, calls] : out.table.unknown()) {
    const size_t row = r->unknownOps.addRow();
    r->unknownOps.setText(row, UnknownOpField::op, op);
    r->unknownOps.set(row, UnknownOpField::calls, static_cast<double>(calls));
  }
  addKernelRows(r->kernels, out.kernels, out.events, out.generated);
  hw::fillOpRows(r->ops, out.hw, rows);
  hw::fillKernelRows(r->kernels, out.hw);
}

NamedResult nameResult(const ProfileOutput& out, bool tables) {
  NamedResult r;
  r.summary = out.summary;
  if (tables) {
    nameTables(out, &r);
  }
  r.setText(TextField::peak_source, out.peak.source);
  r.setText(TextField::peak_dtype, out.peak.dtype);
  r.setText(TextField::timing_mode, out.timingMode);
  r.setText(TextField::timing_note, out.timingNote);
  r.setText(TextField::timing_note_detail, out.timingNoteDetail);
  r.setText(TextField::repetition, out.repetition);
  r.setText(TextField::bandwidth_source, out.bandwidth.source);
  r.setText(TextField::device, out.device);
  r.setText(TextField::model, out.model.name);
  r.setText(TextField::params_note, out.model.note);
  r.setText(TextField::flops_note, out.flopsNote);
  r.setText(TextField::trace_status, out.traceStatus);
  r.setText(TextField::kernel_attribution, out.traced
                                               ? (out.trace.perOpFromTimed ? "timed" : "counted")
                                           : !out.cpuOpTimes.empty() ? "cpu"
                                                                     : "none");
  r.setText(TextField::chrome_trace, out.chromeTrace);
  r.setText(TextField::counters_status, out.countersStatus);
  r.setText(TextField::counters_not_on_gpu, out.countersNotOnGpu);
  r.setText(TextField::energy_source, out.energy.text);
  return r;
}

}  // namespace torchutil
