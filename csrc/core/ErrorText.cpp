#include "core/ErrorText.h"

#include <algorithm>

namespace torchutil {

std::string errorHeadline(std::string_view what, size_t maxChars) {
  constexpr std::string_view kBlank = " \t\r";
  size_t at = 0;
  while (at <= what.size()) {
    const size_t end = std::min(what.find('\n', at), what.size());
    std::string_view line = what.substr(at, end - at);
    const size_t first = line.find_first_not_of(kBlank);
    if (first != std::string_view::npos) {
      line = line.substr(first, line.find_last_not_of(kBlank) - first + 1);
      if (line.size() <= maxChars) {
        return std::string(line);
      }
      const size_t keep = maxChars > 3 ? maxChars - 3 : 0;
      return std::string(line.substr(0, keep)) + "...";
    }
    at = end + 1;
  }
  return "";
}

}  // namespace torchutil
