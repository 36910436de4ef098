# Every dependency is a Debian package; scripts/install-deps installs them.
# The runtime's (and Threads, which glslang's config needs first).
include(${CMAKE_CURRENT_LIST_DIR}/RuntimeDependencies.cmake)
find_package(tomlplusplus CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(glslang CONFIG REQUIRED)
find_package(SPIRV-Tools CONFIG REQUIRED)
if(LATHE_TESTS)
  find_package(doctest CONFIG REQUIRED)
  include(doctest)  # doctest_discover_tests
endif()
# Clang 14 in-process (libclang-cpp14-dev, llvm-14-dev, libclang-common-14-dev):
# libFormat formats the generated files, libTooling compiles them for `lathe check`.
# LLVM's config needs the C language enabled (FindTerminfo), see project().
find_package(Clang CONFIG REQUIRED HINTS /usr/lib/llvm-14/lib/cmake/clang)
if(NOT LLVM_VERSION_MAJOR EQUAL 14)
  message(FATAL_ERROR "lathe needs Clang/LLVM 14, found ${LLVM_PACKAGE_VERSION} (${LLVM_DIR})")
endif()
# Clang's own headers (stddef.h, …) that an in-process compile needs.
set(LATHE_CLANG_RESOURCE_DIR ${LLVM_LIBRARY_DIR}/clang/${LLVM_PACKAGE_VERSION})
if(NOT EXISTS ${LATHE_CLANG_RESOURCE_DIR}/include/stddef.h)
  message(FATAL_ERROR "Clang's resource headers are missing at ${LATHE_CLANG_RESOURCE_DIR} (libclang-common-14-dev)")
endif()
