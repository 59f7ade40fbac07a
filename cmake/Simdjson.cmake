# simdjson::simdjson (sp_core's update-record parser, core/src/update_record_parser.cpp): the system's
# package (Debian: libsimdjson-dev, a shared library), or, where there is none (a GPU machine that
# has nvcc and a pip LibTorch only), the copy in SP_SIMDJSON_DIR: include/simdjson.h and
# lib/libsimdjson.so.* (tools/gpu_checks/run_trainer_on_device.sh --prepare-carry carries Debian's).
# A shared library imported by its full path: CMake puts its folder in the build tree's RPATH, so
# the executables run from build/ without LD_LIBRARY_PATH.
set(SP_SIMDJSON_DIR "" CACHE PATH "A folder with include/simdjson.h and lib/libsimdjson.so.*, used when find_package finds none")
find_package(simdjson CONFIG QUIET)
if(NOT simdjson_FOUND)
  file(GLOB _sp_simdjson_libs "${SP_SIMDJSON_DIR}/lib/libsimdjson.so.*")
  list(SORT _sp_simdjson_libs)
  if(SP_SIMDJSON_DIR AND EXISTS "${SP_SIMDJSON_DIR}/include/simdjson.h" AND _sp_simdjson_libs)
    list(GET _sp_simdjson_libs 0 _sp_simdjson_soname)  # libsimdjson.so.14 sorts before .so.14.0.0
    find_package(Threads REQUIRED)
    add_library(simdjson::simdjson SHARED IMPORTED GLOBAL)
    # The definition the package's own target carries: the library was built with it, and it
    # changes the layout of classes the header shares with it.
    set_target_properties(simdjson::simdjson PROPERTIES
                          IMPORTED_LOCATION "${_sp_simdjson_soname}"
                          INTERFACE_INCLUDE_DIRECTORIES "${SP_SIMDJSON_DIR}/include"
                          INTERFACE_COMPILE_DEFINITIONS "SIMDJSON_THREADS_ENABLED=1"
                          INTERFACE_LINK_LIBRARIES Threads::Threads)
    message(STATUS "Selective Precision: simdjson from ${_sp_simdjson_soname}")
  else()
    message(FATAL_ERROR "simdjson not found: install libsimdjson-dev, or set SP_SIMDJSON_DIR to a "
                        "folder holding include/simdjson.h and lib/libsimdjson.so.*")
  endif()
endif()
