#include "core/FormulaRegistry.h"

#include <algorithm>
#include <stdexcept>

namespace torchutil {

const char* opClassName(OpClass c) {
  switch (c) {
    case OpClass::Matrix: return "matrix";
    case OpClass::Vector: return "vector";
    case OpClass::Memory: return "memory";
    case OpClass::Transparent: return "transparent";
  }
  return "?";
}

FormulaRegistry& FormulaRegistry::globalForUsers() {
  static FormulaRegistry registry = [] {
    FormulaRegistry r;
    registerAllFormulas(r);
    return r;
  }();
  return registry;
}

const FormulaRegistry& FormulaRegistry::global() {
  return globalForUsers();
}

void FormulaRegistry::add(std::string name, OpClass opClass, Formula formula) {
  if (entries_.count(name) != 0) {
    throw std::invalid_argument("torchutil: a FLOP formula for '" + name +
                                "' is already registered");
  }
  const bool arithmetic = opClass == OpClass::Matrix || opClass == OpClass::Vector;
  if (arithmetic && formula == nullptr) {
    throw std::invalid_argument("torchutil: '" + name + "' is registered as " +
                                opClassName(opClass) + " but has no formula");
  }
  FormulaEntry entry{name, opClass, formula, {}};
  entries_.emplace(std::move(name), std::move(entry));
}

const FormulaEntry* FormulaRegistry::find(std::string_view name) const {
  // unordered_map<string> has no heterogeneous lookup before C++20; op names are short, so the
  // temporary string stays in the small-string buffer.
  auto it = entries_.find(std::string(name));
  if (it != entries_.end()) {
    return &it->second;
  }
  if (name.size() > 1 && name.back() == '_') {
    it = entries_.find(std::string(name.substr(0, name.size() - 1)));
    if (it != entries_.end()) {
      return &it->second;
    }
  }
  for (std::string_view ns : {"prim::", "profiler::", "util::"}) {
    if (name.substr(0, ns.size()) == ns) {
      return &transparentNamespace_;
    }
  }
  return nullptr;
}

void FormulaRegistry::addUser(const std::string& name, UserFormula formula, bool replace) {
  if (formula == nullptr) {
    throw std::invalid_argument("torchutil: the FLOP formula given for '" + name +
                                "' is not callable");
  }
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    const bool user = it->second.user != nullptr;
    if (!replace) {
      throw std::invalid_argument(
          user ? "torchutil: a FLOP formula for '" + name +
                     "' is already registered (by register_formula); unregister it first, or "
                     "pass override=True"
               : "torchutil: '" + name + "' has a built-in FLOP formula (" +
                     opClassName(it->second.opClass) + "); pass override=True to replace it");
    }
    if (!user) {
      replaced_.insert_or_assign(name, std::move(it->second));
    }
    entries_.erase(it);
  }
  entries_.insert_or_assign(name, FormulaEntry{name, OpClass::Matrix, nullptr, std::move(formula)});
  ++generation_;
}

void FormulaRegistry::removeUser(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.user == nullptr) {
    throw std::invalid_argument("torchutil: '" + name +
                                "' has no FLOP formula registered by register_formula");
  }
  entries_.erase(it);
  auto old = replaced_.find(name);
  if (old != replaced_.end()) {
    entries_.insert_or_assign(name, std::move(old->second));
    replaced_.erase(old);
  }
  ++generation_;
}

std::vector<std::string> FormulaRegistry::userNames() const {
  std::vector<std::string> out;
  for (const auto& kv : entries_) {
    if (kv.second.user != nullptr) {
      out.push_back(kv.first);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> FormulaRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& kv : entries_) {
    out.push_back(kv.first);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace torchutil
