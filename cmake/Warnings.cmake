# lathe_options: the project's warning set (errors in CI), include root and
# sanitizer flags, linked by every target. Installed (lathe::options), it is
# the include root alone: the warnings are lathe's, not its users'.
add_library(lathe_options INTERFACE)
set(lathe_warnings -Wall -Wextra -Wnon-virtual-dtor
  # `VkFooInfo info{VK_STRUCTURE_TYPE_FOO}` zero-fills the rest on purpose.
  -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND lathe_warnings -Wshadow=local)
else()
  list(APPEND lathe_warnings -Wshadow-uncaptured-local)
endif()
if(LATHE_WERROR)
  list(APPEND lathe_warnings -Werror)
endif()
target_compile_options(lathe_options INTERFACE "$<BUILD_INTERFACE:${lathe_warnings}>")
target_include_directories(lathe_options INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                   $<INSTALL_INTERFACE:include/lathe>)
if(LATHE_SANITIZE OR LATHE_FUZZ)
  # vptr is off: Debian's glslang is built without RTTI, and UBSan's vptr
  # check needs the typeinfo of every polymorphic class it sees.
  # float-cast-overflow is not part of GCC's `undefined` group.
  set(lathe_sanitizers address,undefined,float-cast-overflow)
  set(lathe_instrument ${lathe_sanitizers})
  if(LATHE_FUZZ)
    # libFuzzer's coverage instrumentation in every library a fuzz target
    # links, so that it steers by the parsers' branches; libFuzzer's main()
    # only in the targets themselves (tests/CMakeLists.txt).
    set(lathe_instrument fuzzer-no-link,${lathe_sanitizers})
  endif()
  target_compile_options(lathe_options INTERFACE
    "$<BUILD_INTERFACE:-fsanitize=${lathe_instrument};-fno-sanitize=vptr;-fno-omit-frame-pointer;-fno-sanitize-recover=all>")
  target_link_options(lathe_options INTERFACE "$<BUILD_INTERFACE:-fsanitize=${lathe_sanitizers};-fno-sanitize=vptr>")
endif()
