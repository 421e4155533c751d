# cmake/ascanInstall.cmake: install rules for the header-only ascan::ascan target.
#
# What gets installed is the headers, an export set naming the INTERFACE target, and a package
# config that finds CUDAToolkit and the toolkit's own CCCL (for CCCL::CUB) before loading it.
# Nothing here sets compile options or CUDA architectures: the consumer chooses those.

include(CMakePackageConfigHelpers)

set(ASCAN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ascan"
    CACHE STRING "Where ascan's CMake package files are installed, relative to the prefix")
mark_as_advanced(ASCAN_INSTALL_CMAKEDIR)

# CCCL::CUB is an ALIAS of a plain, non-imported target (_CUB_CUB) that CCCL's config creates in
# each project that finds it; install(EXPORT) resolves the alias and refuses to export a
# dependency on _CUB_CUB, even inside $<INSTALL_INTERFACE:...>. So the build tree links CUB
# through $<BUILD_INTERFACE:CCCL::CUB>, which the export drops, and ascanConfig.cmake links
# CCCL::CUB onto the imported ascan::ascan after find_dependency(CCCL). The rewrite below does
# that here if CMakeLists.txt links CCCL::CUB bare; it is a no-op once it links the genex itself.
get_target_property(_ascan_links ascan INTERFACE_LINK_LIBRARIES)
if(_ascan_links)
  list(TRANSFORM _ascan_links REPLACE "^CCCL::CUB$" "$<BUILD_INTERFACE:CCCL::CUB>")
  set_target_properties(ascan PROPERTIES INTERFACE_LINK_LIBRARIES "${_ascan_links}")
endif()
unset(_ascan_links)

install(TARGETS ascan EXPORT ascanTargets)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/ascan"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING
          PATTERN "*.cuh"
          PATTERN "*.hpp")

install(EXPORT ascanTargets
        NAMESPACE ascan::
        FILE ascanTargets.cmake
        DESTINATION "${ASCAN_INSTALL_CMAKEDIR}")

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/ascanConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/ascanConfig.cmake"
  INSTALL_DESTINATION "${ASCAN_INSTALL_CMAKEDIR}")

# Headers only, so the version file is the same for every architecture.
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/ascanConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion
  ARCH_INDEPENDENT)

install(FILES "${PROJECT_BINARY_DIR}/ascanConfig.cmake"
              "${PROJECT_BINARY_DIR}/ascanConfigVersion.cmake"
        DESTINATION "${ASCAN_INSTALL_CMAKEDIR}")

# The license and the change log, beside the headers' documentation.
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" "${PROJECT_SOURCE_DIR}/CHANGELOG.md"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/ascan")
