// Errors as a note gives them: the first line of an exception's text, whatever follows it.
#include <gtest/gtest.h>

#include <string>

#include "core/ErrorText.h"

namespace torchutil {
namespace {

TEST(ErrorTextTest, APythonErrorsTracebackIsLeftOut) {
  // What pybind11's error_already_set::what() gives for a forward that failed in a capture.
  const std::string what =
      "RuntimeError: CUDA error: operation not permitted when stream is capturing\n"
      "Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/...\n"
      "\n"
      "At:\n"
      "  /usr/lib/python3.12/site-packages/transformers/cache_utils.py(412): lazy_init\n"
      "  /usr/lib/python3.12/site-packages/torch/nn/modules/module.py(1773): _call_impl\n";
  EXPECT_EQ(errorHeadline(what),
            "RuntimeError: CUDA error: operation not permitted when stream is capturing");
}

TEST(ErrorTextTest, AC10ErrorsBacktraceIsLeftOut) {
  EXPECT_EQ(
      errorHeadline("  Expected all tensors to be on the same device  \n"
                    "Exception raised from compute_types at aten/src/ATen/TensorIterator.cpp\n"
                    "frame #0: c10::Error::Error(...) + 0x1 (0x7f in libc10.so)\n"),
      "Expected all tensors to be on the same device");
}

TEST(ErrorTextTest, BlankLinesAreSkippedAndALongLineIsCut) {
  EXPECT_EQ(errorHeadline("\n \t\r\nValueError: bad\nmore"), "ValueError: bad");
  EXPECT_EQ(errorHeadline(std::string(400, 'x'), 10), "xxxxxxx...");
  EXPECT_EQ(errorHeadline("one line"), "one line");
  EXPECT_EQ(errorHeadline(""), "");
  EXPECT_EQ(errorHeadline("\n\n"), "");
}

}  // namespace
}  // namespace torchutil
