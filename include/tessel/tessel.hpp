// The whole of Tessel for kernel authors: `#include <tessel/tessel.hpp>` and `namespace T = tessel;`.
#pragma once

#include "tessel/DType.hpp"
#include "tessel/Error.hpp"
#include "tessel/Frontend.hpp"
#include "tessel/Jit.hpp"
#include "tessel/Version.hpp"
#include "tessel/runtime/Tensor.hpp"
