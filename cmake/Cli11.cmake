# CLI11::CLI11 (the command-line parser of sp-trainer, sp-ctl and sp-experiment): the system's
# package (Debian: libcli11-dev), or, where there is none (a GPU machine with nvcc and a pip
# LibTorch only), the headers in SP_CLI11_INCLUDE_DIR (a folder holding CLI/CLI.hpp;
# tools/gpu_checks/run_trainer_on_device.sh carries a copy). Header-only, used by executables only,
# so nothing installed depends on it.
set(SP_CLI11_INCLUDE_DIR "" CACHE PATH "A folder with CLI/CLI.hpp, used when find_package finds none")
find_package(CLI11 2.1 CONFIG QUIET)
if(NOT CLI11_FOUND)
  if(SP_CLI11_INCLUDE_DIR AND EXISTS "${SP_CLI11_INCLUDE_DIR}/CLI/CLI.hpp")
    add_library(CLI11::CLI11 INTERFACE IMPORTED GLOBAL)
    set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${SP_CLI11_INCLUDE_DIR}")
    message(STATUS "Selective Precision: CLI11 from ${SP_CLI11_INCLUDE_DIR}")
  else()
    message(FATAL_ERROR "CLI11 >= 2.1 not found: install libcli11-dev, or set "
                        "SP_CLI11_INCLUDE_DIR to a folder holding CLI/CLI.hpp")
  endif()
endif()
