# The build identity: the semantic version (project(VERSION) in the top CMakeLists.txt), the git
# commit and whether the CUDA backend is built in, written to <build>/generated/sanctum_build_id.h
# for src/base/version.cc alone. The header is rewritten on every build but only when its text
# changes, so a new commit recompiles one file and relinks; nothing else rebuilds.
#
# SANCTUM_BUILD_COMMIT names the commit where git cannot (a source tarball); empty asks git, and a
# tree without git says "unknown".
set(SANCTUM_BUILD_COMMIT "" CACHE STRING "Commit to report when the source tree has no git (empty: ask git)")
find_package(Git QUIET)

set(sanctum_build_id_dir ${PROJECT_BINARY_DIR}/generated)
set(sanctum_build_id_header ${sanctum_build_id_dir}/sanctum_build_id.h)
if(SANCTUM_CUDA)
  set(sanctum_build_id_cuda 1)
else()
  set(sanctum_build_id_cuda 0)
endif()
add_custom_target(sanctum_build_id
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUTPUT=${sanctum_build_id_header}
          -DVERSION=${PROJECT_VERSION}
          -DCUDA=${sanctum_build_id_cuda}
          "-DGIT=${GIT_EXECUTABLE}"
          "-DCOMMIT=${SANCTUM_BUILD_COMMIT}"
          -P ${PROJECT_SOURCE_DIR}/cmake/write_build_id.cmake
  BYPRODUCTS ${sanctum_build_id_header}
  COMMENT "Build identity (version, commit)"
  VERBATIM)
add_dependencies(sanctum_base sanctum_build_id)
target_include_directories(sanctum_base PRIVATE ${sanctum_build_id_dir})
