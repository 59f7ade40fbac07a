set(CPACK_PACKAGE_NAME selective-precision)
include(CPack)
