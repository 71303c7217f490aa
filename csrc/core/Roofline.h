#pragma once
// The roofline model of one op, torch-free: how fast its FLOPs could run on a device given
// the bytes it moves, and what bounds it. Units: FLOPs, bytes, seconds, FLOP/s, bytes/s.
// The classification is documented in docs/roofline.md.
#include <cstdint>
#include <optional>

namespace torchutil {

enum class RooflineBound : uint8_t { Compute, Memory, Overhead, Unknown };

const char* rooflineBoundName(RooflineBound b);  // "compute-bound", ... , "unknown"

// Overhead-bound: the roofline explains less than this share of the measured kernel time.
constexpr double kOverheadShare = 0.5;

// Arithmetic intensity (FLOPs per byte) at which the memory roof meets the compute roof:
// peak / bandwidth.
double ridgeIntensity(double peakFlopsPerSecond, double bytesPerSecond);

// min(peak, intensity x bandwidth). NaN when intensity is NaN (an op with no FLOPs and no
// bytes); intensity +inf (FLOPs, no bytes) gives peak.
double attainableFlopsPerSecond(double intensity, double peakFlopsPerSecond, double bytesPerSecond);

// The least time the op needs on the device: max(flops / peak, bytes / bandwidth).
double rooflineSeconds(double flops, double bytes, double peakFlopsPerSecond,
                       double bytesPerSecond);

struct RooflinePoint {
  double intensity = 0.0;  // flops / bytes
  double attainableFlopsPerSecond = 0.0;
  double attainableUtilization = 0.0;  // attainable / peak, 0..1
  double rooflineSeconds = 0.0;        // max(flops / peak, bytes / bandwidth)
  // Measured, when kernel seconds were given (else NaN):
  double achievedFlopsPerSecond = 0.0;  // flops / kernel seconds
  double rooflineShare = 0.0;           // rooflineSeconds / kernel seconds
  RooflineBound bound = RooflineBound::Unknown;
};

// Places one op on the roofline. peak and bandwidth must be positive and finite, flops and
// bytes non-negative (std::invalid_argument otherwise). kernelSeconds, when given and > 0,
// is the op's measured kernel time: if the roofline accounts for less than kOverheadShare of
// it, the op is overhead-bound; otherwise (or without a measurement) it is compute-bound when
// its intensity is at or above the ridge point and memory-bound below. An op with neither
// FLOPs nor bytes is Unknown.
RooflinePoint placeOnRoofline(double flops, double bytes, double peakFlopsPerSecond,
                              double bytesPerSecond,
                              std::optional<double> kernelSeconds = std::nullopt);

}  // namespace torchutil
