#include "core/Roofline.h"
#include "core/NotANumber.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace torchutil {
namespace {

void checkDevice(double peak, double bandwidth) {
  if (!(peak > 0 && std::isfinite(peak) && bandwidth > 0 && std::isfinite(bandwidth))) {
    std::ostringstream msg;
    msg << "torchutil: the roofline needs a positive, finite peak FLOP/s and memory bandwidth, "
           "got peak "
        << peak << " FLOP/s and bandwidth " << bandwidth << " bytes/s";
    throw std::invalid_argument(msg.str());
  }
}

}  // namespace

const char* rooflineBoundName(RooflineBound b) {
  switch (b) {
    case RooflineBound::Compute: return "compute-bound";
    case RooflineBound::Memory: return "memory-bound";
    case RooflineBound::Overhead: return "overhead-bound";
    case RooflineBound::Unknown: break;
  }
  return "unknown";
}

double ridgeIntensity(double peakFlopsPerSecond, double bytesPerSecond) {
  checkDevice(peakFlopsPerSecond, bytesPerSecond);
  return peakFlopsPerSecond / bytesPerSecond;
}

double attainableFlopsPerSecond(double intensity, double peakFlopsPerSecond,
                                double bytesPerSecond) {
  checkDevice(peakFlopsPerSecond, bytesPerSecond);
  if (std::isnan(intensity)) {
    return kNaN;
  }
  return std::min(peakFlopsPerSecond, intensity * bytesPerSecond);
}

double rooflineSeconds(double flops, double bytes, double peakFlopsPerSecond,
                       double bytesPerSecond) {
  checkDevice(peakFlopsPerSecond, bytesPerSecond);
  return std::max(flops / peakFlopsPerSecond, bytes / bytesPerSecond);
}

RooflinePoint placeOnRoofline(double flops, double bytes, double peakFlopsPerSecond,
                              double bytesPerSecond, std::optional<double> kernelSeconds) {
  checkDevice(peakFlopsPerSecond, bytesPerSecond);
  if (!(flops >= 0 && bytes >= 0)) {
    std::ostringstream msg;
    msg << "torchutil: an op's FLOPs and bytes must be non-negative, got " << flops << " FLOPs and "
        << bytes << " bytes";
    throw std::invalid_argument(msg.str());
  }
  RooflinePoint p;
  const bool empty = flops == 0 && bytes == 0;
  p.intensity =
      empty ? kNaN : (bytes == 0 ? std::numeric_limits<double>::infinity() : flops / bytes);
  p.attainableFlopsPerSecond =
      attainableFlopsPerSecond(p.intensity, peakFlopsPerSecond, bytesPerSecond);
  p.attainableUtilization = p.attainableFlopsPerSecond / peakFlopsPerSecond;
  p.rooflineSeconds = rooflineSeconds(flops, bytes, peakFlopsPerSecond, bytesPerSecond);
  const bool measured =
      kernelSeconds.has_value() && *kernelSeconds > 0 && std::isfinite(*kernelSeconds);
  p.achievedFlopsPerSecond = measured ? flops / *kernelSeconds : kNaN;
  p.rooflineShare = measured ? p.rooflineSeconds / *kernelSeconds : kNaN;
  if (empty) {
    p.bound = RooflineBound::Unknown;
  } else if (measured && p.rooflineShare < kOverheadShare) {
    p.bound = RooflineBound::Overhead;
  } else {
    p.bound = p.intensity >= peakFlopsPerSecond / bytesPerSecond ? RooflineBound::Compute
                                                                 : RooflineBound::Memory;
  }
  return p;
}

}  // namespace torchutil
