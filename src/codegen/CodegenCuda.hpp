// Lowered IR -> CUDA C++ that includes the device headers (device/tessel/*.cuh).
#pragma once

#include <string>

#include "Lower.hpp"

namespace tessel::codegen {

// The __global__ function's name for a PrimFunc (extern "C", so unmangled).
std::string kernel_name(const std::string& func_name);

std::string generate_cuda(const LoweredFunc& f);

}  // namespace tessel::codegen
