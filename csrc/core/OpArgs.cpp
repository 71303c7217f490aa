#include "core/OpArgs.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "core/Convention.h"

namespace torchutil {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) {
    n = saturatingMul(n, s);
  }
  return n;
}

int64_t TensorInfo::nbytes() const {
  return sparse() ? storedBytes : saturatingMul(numel(), elementSize);
}

int64_t TensorInfo::size(int64_t d) const {
  const int64_t n = dim();
  const int64_t i = d < 0 ? d + n : d;
  if (i < 0 || i >= n) {
    throw std::out_of_range("dimension " + std::to_string(d) + " out of range for a " +
                            std::to_string(n) + "-d tensor");
  }
  return sizes[static_cast<size_t>(i)];
}

const char* torchDtypeName(const char* c10Name) {
  // c10/core/ScalarType.h's names on the left, torch.<dtype> on the right.
  static constexpr std::pair<std::string_view, const char*> kNames[] = {
      {"Byte", "uint8"},
      {"Char", "int8"},
      {"Short", "int16"},
      {"Int", "int32"},
      {"Long", "int64"},
      {"Half", "float16"},
      {"Float", "float32"},
      {"Double", "float64"},
      {"ComplexHalf", "complex32"},
      {"ComplexFloat", "complex64"},
      {"ComplexDouble", "complex128"},
      {"Bool", "bool"},
      {"BFloat16", "bfloat16"},
      {"UInt16", "uint16"},
      {"UInt32", "uint32"},
      {"UInt64", "uint64"},
      {"Float8_e5m2", "float8_e5m2"},
      {"Float8_e4m3fn", "float8_e4m3fn"},
      {"Float8_e5m2fnuz", "float8_e5m2fnuz"},
      {"Float8_e4m3fnuz", "float8_e4m3fnuz"},
      {"QInt8", "qint8"},
      {"QUInt8", "quint8"},
      {"QInt32", "qint32"},
  };
  for (const auto& [c10, torchName] : kNames) {
    if (c10 == c10Name) {
      return torchName;
    }
  }
  return c10Name;
}

Arg Arg::ofTensor(std::vector<int64_t> sizes, int64_t elementSize, const char* dtype) {
  Arg a;
  a.kind = ArgKind::Tensor;
  a.tensor.sizes = std::move(sizes);
  a.tensor.elementSize = elementSize;
  a.tensor.dtype = dtype;
  return a;
}

Arg Arg::ofInt(int64_t v) {
  Arg a;
  a.kind = ArgKind::Int;
  a.ints = {v};
  a.number = static_cast<double>(v);
  return a;
}

Arg Arg::ofInts(std::vector<int64_t> v) {
  Arg a;
  a.kind = ArgKind::IntList;
  a.ints = std::move(v);
  return a;
}

Arg Arg::ofDouble(double v) {
  Arg a;
  a.kind = ArgKind::Double;
  a.number = v;
  return a;
}

Arg Arg::ofBool(bool v) {
  Arg a;
  a.kind = ArgKind::Bool;
  a.flag = v;
  a.number = v ? 1.0 : 0.0;
  return a;
}

Arg Arg::ofString(std::string v) {
  Arg a;
  a.kind = ArgKind::String;
  a.text = std::move(v);
  return a;
}

Arg Arg::ofSparse(std::vector<int64_t> sizes, int64_t storedValues, int64_t storedBytes,
                  int64_t elementSize, const char* dtype) {
  Arg a = ofTensor(std::move(sizes), elementSize, dtype);
  a.tensor.storedValues = storedValues;
  a.tensor.storedBytes = storedBytes;
  return a;
}

int64_t totalBytes(const Args& args) {
  int64_t bytes = 0;
  for (const Arg& a : args) {
    if (a.kind == ArgKind::Tensor) {
      bytes = saturatingAdd(bytes, a.tensor.nbytes());
    } else if (a.kind == ArgKind::TensorList) {
      for (const TensorInfo& t : a.tensors) {
        bytes = saturatingAdd(bytes, t.nbytes());
      }
    }
  }
  return bytes;
}

bool anyNested(const Args& args) {
  for (const Arg& a : args) {
    if ((a.kind == ArgKind::Tensor && a.tensor.nested) ||
        (a.kind == ArgKind::TensorList &&
         std::any_of(a.tensors.begin(), a.tensors.end(),
                     [](const TensorInfo& t) { return t.nested; }))) {
      return true;
    }
  }
  return false;
}

const TensorInfo* firstTensor(const Args& args) {
  for (const Arg& a : args) {
    if (a.kind == ArgKind::Tensor) {
      return &a.tensor;
    }
    if (a.kind == ArgKind::TensorList && !a.tensors.empty()) {
      return &a.tensors.front();
    }
  }
  return nullptr;
}

}  // namespace torchutil
