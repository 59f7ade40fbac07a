// check_device_rounding [cpu|cuda]: the device rounding of activations and gradients against the
// core reference, bit for bit, on that device (rounding_check.h). Exit 0 when every case matches,
// 1 when one does not (named), 2 for a bad argument or a device this LibTorch cannot reach.
#include <c10/core/Device.h>
#include <torch/cuda.h>

#include <exception>
#include <iostream>
#include <string>

#include "rounding_check.h"

int main(int argc, char** argv) {
    const std::string name = argc > 1 ? argv[1] : "cpu";
    if (argc > 2 || (name != "cpu" && name != "cuda")) {
        std::cerr << "usage: check_device_rounding [cpu|cuda]\n";
        return 2;
    }
    if (name == "cuda" && !torch::cuda::is_available()) {
        std::cerr << "check_device_rounding: no CUDA device for this LibTorch\n";
        return 2;
    }
    try {
        const std::string mismatch = sp::check::rounding_mismatch(c10::Device(name));
        if (!mismatch.empty()) {
            std::cout << "FAIL  rounded_rows_aten on " << name << " against the reference: " << mismatch
                      << '\n';
            return 1;
        }
        std::cout << "PASS  rounded_rows_aten on " << name
                  << ": every format bit for bit with the core reference\n";
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "check_device_rounding: " << e.what() << '\n';
        return 1;
    }
}
