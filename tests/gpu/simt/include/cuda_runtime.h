#pragma once
// The SIMT emulator's stand-in for <cuda_runtime.h>: the runtime API and the CUDA C++ device constructs.
#include "simt/device.h"
#include "simt/runtime_api.h"
