# SP_SANITIZE instruments every first-party target of the build (the `asan` and `tsan` presets):
#   address  AddressSanitizer and UndefinedBehaviorSanitizer (LeakSanitizer comes with ASan)
#   thread   ThreadSanitizer
# Third-party libraries (LibTorch, Qt, libzmq) stay uninstrumented; tests/sanitizers holds the
# suppressions for what they report and the reason for each. The SIMT emulator's own TSan variants
# and the benchmarks are left out of a sanitized build (tests/CMakeLists.txt).
set(SP_SANITIZE "" CACHE STRING "Instrument the build: address (ASan+UBSan), thread (TSan) or empty")
set_property(CACHE SP_SANITIZE PROPERTY STRINGS "" address thread)

if(SP_SANITIZE STREQUAL "address")
  set(sp_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(SP_SANITIZE STREQUAL "thread")
  set(sp_sanitize_flags -fsanitize=thread)
elseif(NOT SP_SANITIZE STREQUAL "")
  message(FATAL_ERROR "SP_SANITIZE is '${SP_SANITIZE}'; use address, thread or leave it empty")
endif()

if(sp_sanitize_flags)
  if(SP_FUZZ)
    message(FATAL_ERROR "SP_SANITIZE and SP_FUZZ do not mix: the fuzz build has its own sanitizers")
  endif()
  # C++ only: nvcc takes none of these flags (the sanitizer presets build without CUDA anyway).
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${sp_sanitize_flags};-fno-omit-frame-pointer>")
  # GCC's flow analysis sees through the instrumentation badly: it reports maybe-uninitialized
  # inside LibTorch's headers (c10::optional copies) under -fsanitize at -O1. The ci preset, built
  # without sanitizers, keeps the warning as an error for our own code.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>")
  endif()
  add_link_options(${sp_sanitize_flags})
  message(STATUS "Selective Precision: sanitizers: ${SP_SANITIZE}")
endif()
