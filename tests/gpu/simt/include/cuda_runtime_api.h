#pragma once
// The SIMT emulator's stand-in for the CUDA runtime header (tests only: device memory is host memory).
#include "simt/runtime_api.h"
