# lathe_add_model(<target> SPEC <spec.toml>)
#
# Generates the model-specific build of a spec into
# ${CMAKE_BINARY_DIR}/models/<target>/ (model.hpp, model.cpp, kernels.cpp) and defines:
#   <target>      a static library: the generated code + lathe::model_info()
#   <target>_run  the model-specific executable, ${CMAKE_BINARY_DIR}/bin/<target>
# The generated files are remade when the spec or the lathe tool change (the
# tool carries templates/ and shaders/, so a change to them rebuilds it).
#
# The same function serves lathe's own build and a project that did
# find_package(lathe CONFIG REQUIRED): both name lathe's targets lathe::…
# (aliases in the one, the installed package's targets in the other).
function(lathe_add_model target)
  cmake_parse_arguments(ARG "" "SPEC" "" ${ARGN})
  if(NOT ARG_SPEC)
    message(FATAL_ERROR "lathe_add_model(${target}): SPEC is required")
  endif()
  get_filename_component(spec ${ARG_SPEC} ABSOLUTE)
  if(NOT EXISTS ${spec})
    message(FATAL_ERROR "lathe_add_model(${target}): SPEC ${ARG_SPEC} does not exist (${spec})")
  endif()
  # Relative to the project, as the generated #line directives name it.
  file(RELATIVE_PATH spec_rel ${PROJECT_SOURCE_DIR} ${spec})
  set(out ${CMAKE_BINARY_DIR}/models/${target})
  add_custom_command(
    OUTPUT ${out}/model.hpp ${out}/model.cpp ${out}/kernels.cpp
    COMMAND lathe::lathe gen ${spec_rel} -o ${out} --quiet
    DEPENDS ${spec} $<TARGET_FILE:lathe::lathe>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "lathe gen ${spec_rel}"
    VERBATIM)
  add_library(${target} STATIC ${out}/model.cpp ${out}/kernels.cpp ${out}/model.hpp)
  target_include_directories(${target} PUBLIC ${out})
  # The model's C++ API: its model_info(), Session (load, prefill, decode),
  # tokenizers (lathe::text), the sampler and text generation (lathe::generate).
  target_link_libraries(${target} PUBLIC lathe::options lathe::text lathe::generate)
  # The executable's front end, main() included, is compiled once, in the
  # static library lathe::model_main: the executable compiles nothing of its
  # own. model_main comes first on the link line, so that the model_info()
  # its main() calls is looked up in the model's library after it.
  add_executable(${target}_run ${out}/model.hpp)
  target_link_libraries(${target}_run PRIVATE lathe::model_main ${target})
  set_target_properties(${target}_run PROPERTIES OUTPUT_NAME ${target} RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin
                                                 LINKER_LANGUAGE CXX)
endfunction()
