# Findre2: RE2, the linear-time regular-expression library, as the imported target re2::re2.
#
# Prefers RE2's own CMake package (upstream installs re2Config.cmake); Debian's libre2-dev
# ships only pkg-config metadata, so that is the fallback. Sets re2_FOUND.
find_package(re2 CONFIG QUIET)
if(TARGET re2::re2)
  if(NOT re2_FIND_QUIETLY)
    message(STATUS "Found re2: CMake package ${re2_DIR}")
  endif()
  set(re2_FOUND TRUE)
  return()
endif()

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_RE2 QUIET IMPORTED_TARGET re2)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(re2 REQUIRED_VARS PC_RE2_LINK_LIBRARIES
                                  FAIL_MESSAGE "RE2 not found: install libre2-dev (Debian) or RE2 with its CMake package")
if(re2_FOUND AND NOT TARGET re2::re2)
  add_library(re2::re2 INTERFACE IMPORTED)
  target_link_libraries(re2::re2 INTERFACE PkgConfig::PC_RE2)
endif()
