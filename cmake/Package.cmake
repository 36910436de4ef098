# lathe as a package: the lathe:: names lathe_add_model links, the toolchain
# `lathe build` compiles models with, and the installed tree
# (`cmake --install build --prefix P`):
#   P/bin/lathe
#   P/lib/liblathe_{core,runtime,text,image,grammar,generate,serve,model_main}.a
#   P/include/lathe/{core,runtime}/…          the headers of those libraries
#   P/lib/cmake/lathe/                        find_package(lathe CONFIG): targets
#                                             lathe::{core,runtime,text,image,grammar,generate,serve,model_main,options,lathe}
#                                             and lathe_add_model()
#   P/share/lathe/toolchain.txt               for `P/bin/lathe build` and `run`
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# In link order: each needs only those after it.
set(lathe_package_libraries lathe_model_main lathe_serve lathe_generate lathe_grammar lathe_image lathe_text lathe_runtime lathe_core)
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
set(lathe_toolchain_packages LATHE_PCRE2 LATHE_UTF8PROC LATHE_SENTENCEPIECE LATHE_HTTPLIB)
if(LATHE_MPI_FOUND)
  list(APPEND lathe_toolchain_packages LATHE_MPI)
endif()
foreach(package ${lathe_toolchain_packages})
  foreach(property INTERFACE_LINK_LIBRARIES INTERFACE_LINK_OPTIONS)
    string(APPEND lathe_toolchain_system "link $<JOIN:$<TARGET_PROPERTY:PkgConfig::${package},${property}>,\nlink >\n")
  endforeach()
endforeach()
# (lathe_image: libpng and libjpeg-turbo.)
string(APPEND lathe_toolchain_system "link $<TARGET_FILE:PNG::PNG>\nlink $<TARGET_FILE:JPEG::JPEG>\n")
string(APPEND lathe_toolchain_system "link $<TARGET_FILE:Vulkan::Vulkan>\nlink -pthread\n")
# The build tree's: beside build/generator/lathe, absolute paths.
set(build_toolchain "${lathe_toolchain}include ${PROJECT_SOURCE_DIR}\n")
# The installed one: paths under the prefix.
set(install_toolchain "${lathe_toolchain}include ${CMAKE_INSTALL_INCLUDEDIR}/lathe\n")
foreach(library ${lathe_package_libraries})
  string(APPEND build_toolchain "lib $<TARGET_FILE:${library}>\n")
  string(APPEND install_toolchain "lib ${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${library}>\n")
endforeach()
file(GENERATE OUTPUT $<TARGET_FILE_DIR:lathe>/lathe-toolchain.txt CONTENT "${build_toolchain}${lathe_toolchain_system}")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/package/toolchain.txt CONTENT "${install_toolchain}${lathe_toolchain_system}")

install(TARGETS lathe lathe_options ${lathe_package_libraries} EXPORT lathe
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lathe/core
        FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lathe/runtime
        FILES_MATCHING PATTERN "*.hpp" PATTERN reference EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/package/toolchain.txt DESTINATION ${CMAKE_INSTALL_DATADIR}/lathe)

set(lathe_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/lathe)
install(EXPORT lathe NAMESPACE lathe:: FILE latheTargets.cmake DESTINATION ${lathe_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/latheConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/latheConfig.cmake ${PROJECT_SOURCE_DIR}/cmake/RuntimeDependencies.cmake
              ${PROJECT_SOURCE_DIR}/cmake/LatheModel.cmake ${PROJECT_BINARY_DIR}/package/latheConfigVersion.cmake
        DESTINATION ${lathe_cmake_dir})
