# lathe_options: the project's warning set (errors in CI), include root and
# sanitizer flags, linked by every target.
add_library(lathe_options INTERFACE)
target_compile_options(lathe_options INTERFACE -Wall -Wextra -Wnon-virtual-dtor
  # `VkFooInfo info{VK_STRUCTURE_TYPE_FOO}` zero-fills the rest on purpose.
  -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(lathe_options INTERFACE -Wshadow=local)
else()
  target_compile_options(lathe_options INTERFACE -Wshadow-uncaptured-local)
endif()
if(LATHE_WERROR)
  target_compile_options(lathe_options INTERFACE -Werror)
endif()
target_include_directories(lathe_options INTERFACE ${PROJECT_SOURCE_DIR})
if(LATHE_SANITIZE)
  # vptr is off: Debian's glslang is built without RTTI, and UBSan's vptr
  # check needs the typeinfo of every polymorphic class it sees.
  # float-cast-overflow is not part of GCC's `undefined` group.
  target_compile_options(lathe_options INTERFACE -fsanitize=address,undefined,float-cast-overflow
                                                 -fno-sanitize=vptr -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(lathe_options INTERFACE -fsanitize=address,undefined,float-cast-overflow -fno-sanitize=vptr)
endif()
