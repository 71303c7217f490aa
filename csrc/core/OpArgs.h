#pragma once
// A torch-free description of an operator's arguments or results: just what FLOP formulas need
// (shapes, element sizes, scalars). The torch layer (IValueArgs.cpp) fills it from c10::IValue;
// GoogleTest fills it by hand.
#include <cstdint>
#include <string>
#include <vector>

namespace torchutil {

struct TensorInfo {
  std::vector<int64_t> sizes;
  int64_t elementSize = 0;  // bytes per element
  const char* dtype = "";   // a static torch name such as "float32" or "float16"
  // A nested tensor: sizes are its components stacked along their first dimension (or
  // flattened), right for elementwise work but not for a contraction's shape.
  bool nested = false;
  // A sparse tensor (COO, CSR, CSC, BSR, BSC): sizes are its dense shape, storedValues the
  // values it stores (its values tensor's elements; -1 for a strided tensor) and storedBytes
  // those values with their indices, what nbytes() then returns.
  int64_t storedValues = -1;
  int64_t storedBytes = 0;

  bool sparse() const { return storedValues >= 0; }
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;
  // The bytes it holds: numel x elementSize, or a sparse tensor's stored values and indices.
  int64_t nbytes() const;
  // Size of dimension d; negative d counts from the end.
  int64_t size(int64_t d) const;
};

// torch's name of a c10 ScalarType name, as Python spells it ("Half" -> "float16",
// "BFloat16" -> "bfloat16", "Long" -> "int64"); c10Name itself for a type with no other name.
// Static storage: the result lives as long as c10Name does.
const char* torchDtypeName(const char* c10Name);

enum class ArgKind : uint8_t {
  None,
  Tensor,
  TensorList,
  Int,
  IntList,
  Double,
  Bool,
  String,
  Other
};

struct Arg {
  ArgKind kind = ArgKind::None;
  TensorInfo tensor;                // kind == Tensor
  std::vector<TensorInfo> tensors;  // kind == TensorList
  std::vector<int64_t> ints;        // kind == IntList, or {value} for kind == Int
  double number = 0.0;              // kind == Double, Int or Bool
  bool flag = false;                // kind == Bool
  std::string text;                 // kind == String (scatter_reduce's reduce="mean")

  static Arg none() { return {}; }
  static Arg ofTensor(std::vector<int64_t> sizes, int64_t elementSize = 4,
                      const char* dtype = "float32");
  static Arg ofInt(int64_t v);
  static Arg ofInts(std::vector<int64_t> v);
  static Arg ofDouble(double v);
  static Arg ofBool(bool v);
  static Arg ofString(std::string v);
  // A sparse tensor of dense shape sizes storing storedValues values in storedBytes bytes
  // (values and indices).
  static Arg ofSparse(std::vector<int64_t> sizes, int64_t storedValues, int64_t storedBytes,
                      int64_t elementSize = 4, const char* dtype = "float32");

  bool isTensor() const { return kind == ArgKind::Tensor; }
};

using Args = std::vector<Arg>;

// Sum of the sizes of every tensor in args (tensor lists included).
int64_t totalBytes(const Args& args);
// Whether any tensor among args is nested.
bool anyNested(const Args& args);
// The first tensor among args, or nullptr.
const TensorInfo* firstTensor(const Args& args);

}  // namespace torchutil
