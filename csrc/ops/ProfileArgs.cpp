#include "ops/ProfileArgs.h"

#include <c10/util/Exception.h>

#include <cstdlib>

#include "core/Options.h"
#include "libtorch/ValueErrors.h"

namespace torchutil {
namespace {

// An IValue of the dispatcher as the table's value (the schema has already checked its type).
OptionValue optionValue(const c10::IValue& v) {
  if (v.isNone()) {
    return std::monostate{};
  }
  if (v.isBool()) {
    return v.toBool();
  }
  if (v.isInt()) {
    return v.toInt();
  }
  if (v.isDouble()) {
    return v.toDouble();
  }
  if (v.isString()) {
    return v.toStringRef();
  }
  std::vector<std::string> strings;
  for (const c10::IValue& s : v.toListRef()) {
    strings.push_back(s.toStringRef());
  }
  return strings;
}

}  // namespace

std::string profileSchema(std::string_view name, std::string_view leading, std::string_view returns,
                          bool summaryOp) {
  std::string s = std::string(name) + "(" + std::string(leading) + ", *";
  for (const OptionRow& o : optionsTable()) {
    if (o.summaryOp || !summaryOp) {
      s += ", " + o.schemaType() + " " + o.name + "=" + o.defaultLiteral();
    }
  }
  return s + ") -> " + std::string(returns);
}

ProfileOptions profileOptions(const OptionValues& values, bool summaryOp) {
  GivenOptions given;
  for (const auto& [name, value] : values) {
    given.emplace(name, optionValue(value));
  }
  ProfileOptions o;
  static_cast<ProfileConfig&>(o) = valueErrors([&] {
    return parseOptions(given, summaryOp,
                        readEnvSwitches([](const char* n) { return std::getenv(n); }));
  });
  return o;
}

}  // namespace torchutil
