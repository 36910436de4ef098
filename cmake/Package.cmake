# lathe as a package: the lathe:: names lathe_add_model links, and the
# toolchain `lathe build` compiles models with.
include(GNUInstallDirs)

# In link order: each needs only those after it.
set(lathe_package_libraries lathe_model_main lathe_text lathe_runtime lathe_core)
foreach(library lathe_options ${lathe_package_libraries})
  string(REPLACE "lathe_" "" name ${library})
  add_library(lathe::${name} ALIAS ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${name})
endforeach()
add_executable(lathe::lathe ALIAS lathe)

# The toolchain of `lathe build` (generator/driver/model_build.hpp): the
# compiler, flags and the libraries above, then what they link, one entry a
# line. The generated code is constexpr data and glue: -O2 without debug
# information keeps its compile short.
set(lathe_toolchain "# How lathe build compiles a model executable (cmake/Package.cmake)\n")
string(APPEND lathe_toolchain "compiler ${CMAKE_CXX_COMPILER}\n")
separate_arguments(lathe_user_flags UNIX_COMMAND "${CMAKE_CXX_FLAGS}")
foreach(flag ${CMAKE_CXX20_STANDARD_COMPILE_OPTION} -O2 -DNDEBUG ${lathe_user_flags})
  string(APPEND lathe_toolchain "flag ${flag}\n")
endforeach()
set(lathe_toolchain_system "")
foreach(package LATHE_PCRE2 LATHE_UTF8PROC LATHE_SENTENCEPIECE)
  foreach(property INTERFACE_LINK_LIBRARIES INTERFACE_LINK_OPTIONS)
    string(APPEND lathe_toolchain_system "link $<JOIN:$<TARGET_PROPERTY:PkgConfig::${package},${property}>,\nlink >\n")
  endforeach()
endforeach()
string(APPEND lathe_toolchain_system "link $<TARGET_FILE:Vulkan::Vulkan>\nlink -pthread\n")
# The build tree's: beside build/generator/lathe, absolute paths.
set(build_toolchain "${lathe_toolchain}include ${PROJECT_SOURCE_DIR}\n")
foreach(library ${lathe_package_libraries})
  string(APPEND build_toolchain "lib $<TARGET_FILE:${library}>\n")
endforeach()
file(GENERATE OUTPUT $<TARGET_FILE_DIR:lathe>/lathe-toolchain.txt CONTENT "${build_toolchain}${lathe_toolchain_system}")

