# lathe_warnings(<target>): the project's warning set, errors in CI.
add_library(lathe_options INTERFACE)
target_compile_options(lathe_options INTERFACE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor
  # `VkFooInfo info{VK_STRUCTURE_TYPE_FOO}` zero-fills the rest on purpose.
  -Wno-missing-field-initializers)
if(LATHE_WERROR)
  target_compile_options(lathe_options INTERFACE -Werror)
endif()
target_include_directories(lathe_options INTERFACE ${PROJECT_SOURCE_DIR})
if(LATHE_SANITIZE)
  target_compile_options(lathe_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                 -fno-sanitize-recover=all)
  target_link_options(lathe_options INTERFACE -fsanitize=address,undefined)
endif()
