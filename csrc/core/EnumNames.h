#pragma once
// One table per enum whose values users name (timing modes, peak sources, counter sets...): the
// table names each value, parses a name, and lists the names in the message of a name it does
// not know, so that a value added to the table is accepted and listed with nothing else to edit.
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace torchutil {

template <typename E>
class EnumNames {
 public:
  EnumNames(std::initializer_list<std::pair<E, const char*>> names) : names_(names) {}

  // The name of e ("?" for a value the table lacks).
  const char* name(E e) const {
    for (const auto& [value, name] : names_) {
      if (value == e) {
        return name;
      }
    }
    return "?";
  }
  std::optional<E> find(std::string_view name) const {
    for (const auto& [value, n] : names_) {
      if (name == n) {
        return value;
      }
    }
    return std::nullopt;
  }
  // The names in the table's order: "'eager', 'cuda_graph' or 'auto'" (last: the word before
  // the last name; ", " lists them all alike).
  std::string listed(std::string_view last = " or ") const {
    std::string out;
    for (size_t i = 0; i < names_.size(); ++i) {
      out += i == 0 ? "" : i + 1 == names_.size() ? std::string(last) : ", ";
      out += "'" + std::string(names_[i].second) + "'";
    }
    return out;
  }
  // The value named `name`; std::invalid_argument "torchutil: <what> must be <listed()>, got
  // '<name>'" when the table has none.
  E parse(std::string_view name, std::string_view what) const {
    if (const std::optional<E> e = find(name)) {
      return *e;
    }
    throw std::invalid_argument("torchutil: " + std::string(what) + " must be " + listed() +
                                ", got '" + std::string(name) + "'");
  }
  const std::vector<std::pair<E, const char*>>& entries() const { return names_; }

 private:
  std::vector<std::pair<E, const char*>> names_;
};

}  // namespace torchutil
