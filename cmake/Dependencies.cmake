# Every dependency is a Debian package; scripts/install-deps installs them.
find_package(Threads REQUIRED)  # glslang's config needs Threads::Threads first
find_package(Vulkan REQUIRED)
find_package(tomlplusplus CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
if(LATHE_TESTS)
  find_package(doctest CONFIG REQUIRED)
  include(doctest)  # doctest_discover_tests
endif()
