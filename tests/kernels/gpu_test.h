#pragma once
// GPU tests skip (never pass) without a usable CUDA device.
#include <gtest/gtest.h>

#include <string>

#include "inferlab/kernels/common/check.h"

#define REQUIRE_GPU()                                           \
  do {                                                          \
    std::string why;                                            \
    if (!::inferlab::gpu_available(&why)) GTEST_SKIP() << why;  \
  } while (0)
