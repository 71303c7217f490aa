#pragma once
// Errors as a result's notes give them, torch-free. An exception's text is often many lines: a
// Python error raised through pybind11 carries its traceback ("RuntimeError: ...\n\nAt:\n
// /…/site-packages/…(12): forward"), a c10::Error its C++ backtrace. A note says what happened
// in one line; the whole text goes where a reader who wants it looks (timing_note_detail).
#include <cstddef>
#include <string>
#include <string_view>

namespace torchutil {

// The first line of an error's text that is not blank, trimmed, at most maxChars characters
// (cut with "..."): "RuntimeError: CUDA error: operation not permitted when stream is capturing".
std::string errorHeadline(std::string_view what, size_t maxChars = 300);

}  // namespace torchutil
