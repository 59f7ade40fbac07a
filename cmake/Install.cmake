# The libraries a trainer outside this repository embeds, installed and exported (component `dev`):
#   find_package(SelectivePrecision REQUIRED)
#   target_link_libraries(my_trainer PRIVATE SelectivePrecision::agent)
# SelectivePrecision::core (policy, config, telemetry; no LibTorch) is exported on its own too, and
# is all a core-only build (SP_BUILD_AGENT=OFF) installs. The remaining exported targets are there
# because the agent links them (keys, transport; the CUDA kernels where LibTorch has CUDA).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SP_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/SelectivePrecision)
set(sp_exported sp_core)
set(sp_header_dirs ${PROJECT_SOURCE_DIR}/core/include)
if(TARGET sp_agent)
  if(TARGET sp_keys)
    list(APPEND sp_exported sp_keys)
  endif()
  list(APPEND sp_exported sp_transport sp_agent)
  if(TARGET sp_transport_client)
    list(APPEND sp_exported sp_transport_client)  # the client half, for a tool that talks to an agent
  endif()
  list(APPEND sp_header_dirs ${PROJECT_SOURCE_DIR}/agent/include ${PROJECT_SOURCE_DIR}/agent/transport/include)
  if(SP_TORCH_HAS_CUDA AND TARGET sp_cuda_stats)
    list(APPEND sp_exported sp_cuda_stats sp_grad_stats_plan)
    list(APPEND sp_header_dirs ${PROJECT_SOURCE_DIR}/agent/cuda/include)
  endif()
endif()

foreach(target IN LISTS sp_exported)
  string(REGEX REPLACE "^sp_" "" name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
endforeach()

install(TARGETS ${sp_exported} EXPORT SelectivePrecisionTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
foreach(dir IN LISTS sp_header_dirs)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
endforeach()
install(EXPORT SelectivePrecisionTargets NAMESPACE SelectivePrecision::
        DESTINATION ${SP_CMAKE_INSTALL_DIR} COMPONENT dev)

# find_dependency() only for what the exported targets link: a core-only install needs no LibTorch.
set(SP_EXPORTS_AGENT OFF)
if(TARGET sp_agent)
  set(SP_EXPORTS_AGENT ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SelectivePrecisionConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/SelectivePrecisionConfig.cmake
                              INSTALL_DESTINATION ${SP_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SelectivePrecisionConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)  # 0.x: a minor version may break the API
install(FILES ${PROJECT_BINARY_DIR}/SelectivePrecisionConfig.cmake
              ${PROJECT_BINARY_DIR}/SelectivePrecisionConfigVersion.cmake
        DESTINATION ${SP_CMAKE_INSTALL_DIR} COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
