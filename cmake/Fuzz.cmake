# SP_FUZZ (the `fuzz` preset): coverage instrumentation, AddressSanitizer and UndefinedBehaviorSanitizer
# on every target, sp_core included, so that the parsers themselves are what libFuzzer explores and
# the sanitizers check. Only the fuzz targets link libFuzzer's main (tests/fuzz/CMakeLists.txt).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "SP_FUZZ needs clang (libFuzzer): configure with the 'fuzz' preset")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
