# nlohmann_json::nlohmann_json: the system's package (Debian: nlohmann-json3-dev), or, where there is
# none (a GPU machine that has nvcc and a pip LibTorch only), the headers in SP_NLOHMANN_INCLUDE_DIR
# (a folder holding nlohmann/json.hpp; tools/gpu_checks/run_trainer_on_device.sh carries a copy).
set(SP_NLOHMANN_INCLUDE_DIR "" CACHE PATH "A folder with nlohmann/json.hpp, used when find_package finds none")
find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  if(SP_NLOHMANN_INCLUDE_DIR AND EXISTS "${SP_NLOHMANN_INCLUDE_DIR}/nlohmann/json.hpp")
    add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
    set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
                          INTERFACE_INCLUDE_DIRECTORIES "${SP_NLOHMANN_INCLUDE_DIR}")
    message(STATUS "Selective Precision: nlohmann_json from ${SP_NLOHMANN_INCLUDE_DIR}")
  else()
    message(FATAL_ERROR "nlohmann_json >= 3.10 not found: install nlohmann-json3-dev, or set "
                        "SP_NLOHMANN_INCLUDE_DIR to a folder holding nlohmann/json.hpp")
  endif()
endif()
