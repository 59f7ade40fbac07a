# Debian packages, one per component, so a dashboard-only machine never pulls in LibTorch:
#   selective-precision-cli        sp-ctl (sp_core only)
#   selective-precision-dashboard  sp-dashboard (Qt 6 + ZeroMQ; never LibTorch)
#   selective-precision-trainer    sp-trainer and the agent (LibTorch)
#   selective-precision-dev        the agent's libraries, headers and find_package files
#   python3-selective-precision    the Python package (python/), for Debian's python3
# Dependencies come from dpkg-shlibdeps on the installed binaries, so they are exactly what each
# binary links. Build with: cmake --build --preset ci --target package  (or cpack in the build dir).
set(CPACK_PACKAGE_NAME selective-precision)
set(CPACK_PACKAGE_VENDOR "Selective Precision")
set(CPACK_PACKAGE_CONTACT "Selective Precision maintainers <maintainers@selective-precision.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)  # one package per component, even while only one exists
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME selective-precision-cli)
set(CPACK_DEBIAN_DASHBOARD_PACKAGE_NAME selective-precision-dashboard)
set(CPACK_DEBIAN_TRAINER_PACKAGE_NAME selective-precision-trainer)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME selective-precision-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-selective-precision)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
# The module links LibTorch's libraries (found by shlibdeps); `import torch` needs Debian's package too.
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3-torch")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "selective_precision: the agent in PyTorch training loops (import selective_precision)")
set(CPACK_COMPONENT_CLI_DESCRIPTION "sp-ctl: policy simulator, control and telemetry tools")
set(CPACK_COMPONENT_DASHBOARD_DESCRIPTION "sp-dashboard: live monitoring and control (Qt 6)")
# The window icon is SVG: Qt draws it only with the SVG image plugin.
set(CPACK_DEBIAN_DASHBOARD_PACKAGE_RECOMMENDS "libqt6svg6")
set(CPACK_COMPONENT_TRAINER_DESCRIPTION "sp-trainer: demo GPT trainer with the agent (LibTorch)")
set(CPACK_COMPONENT_DEV_DESCRIPTION "Selective Precision libraries for embedding the agent (find_package(SelectivePrecision))")
# Static libraries: the -dev package needs LibTorch's, ZeroMQ's and nlohmann_json's headers to build against.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libtorch-dev, libgloo-dev, libzmq3-dev, cppzmq-dev, nlohmann-json3-dev")
# Listed explicitly: CPack folds a lone component into one unnamed package otherwise.
get_cmake_property(SP_INSTALL_COMPONENTS COMPONENTS)
set(CPACK_COMPONENTS_ALL ${SP_INSTALL_COMPONENTS})
set(CPACK_STRIP_FILES ON)
include(CPack)
