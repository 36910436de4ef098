# lathe_add_model(<target> SPEC <spec.toml>)
#
# Generates the model-specific build of a spec into
# ${CMAKE_BINARY_DIR}/models/<target>/ (model.hpp, model.cpp, kernels.cpp) and defines:
#   <target>      a static library: the generated code + lathe::model_info()
#   <target>_run  the model-specific executable, ${CMAKE_BINARY_DIR}/bin/<target>
# The generated files are remade when the spec, templates/ or shaders/ change
# (the generator carries templates/ and shaders/, so a change rebuilds it).
function(lathe_add_model target)
  cmake_parse_arguments(ARG "" "SPEC" "" ${ARGN})
  if(NOT ARG_SPEC)
    message(FATAL_ERROR "lathe_add_model(${target}): SPEC is required")
  endif()
  get_filename_component(spec ${ARG_SPEC} ABSOLUTE)
  file(RELATIVE_PATH spec_rel ${PROJECT_SOURCE_DIR} ${spec})
  set(out ${CMAKE_BINARY_DIR}/models/${target})
  add_custom_command(
    OUTPUT ${out}/model.hpp ${out}/model.cpp ${out}/kernels.cpp
    COMMAND $<TARGET_FILE:lathe> gen ${spec_rel} -o ${out} --quiet
    DEPENDS ${spec} lathe
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "lathe gen ${spec_rel}"
    VERBATIM)
  add_library(${target} STATIC ${out}/model.cpp ${out}/kernels.cpp ${out}/model.hpp)
  target_include_directories(${target} PUBLIC ${out})
  # The model's C++ API: its model_info(), Session (load, prefill, decode),
  # tokenizers, the sampler and text generation.
  target_link_libraries(${target} PUBLIC lathe_options lathe_runtime lathe_text)
  add_executable(${target}_run ${PROJECT_SOURCE_DIR}/cli/model_main.cpp)
  target_link_libraries(${target}_run PRIVATE ${target} CLI11::CLI11)
  set_target_properties(${target}_run PROPERTIES OUTPUT_NAME ${target} RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endfunction()
