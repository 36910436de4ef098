# lathe_add_model(<target> SPEC <spec.toml> [DRAFT <draft.toml>])
#
# Generates the model-specific build of a spec into
# ${CMAKE_BINARY_DIR}/models/<target>/ (model.hpp, model.cpp, kernels.cpp;
# with DRAFT, a draft model's build beside it: draft.hpp, its kernels in
# kernels.cpp, lathe::draft_info(); `lathe gen --draft`) and defines:
#   <target>      a static library: the generated code + lathe::model_info()
#   <target>_run  the model-specific executable, ${CMAKE_BINARY_DIR}/bin/<target>
# The generated files are remade when the spec or the lathe tool change (the
# tool carries templates/ and shaders/, so a change to them rebuilds it).
#
# The same function serves lathe's own build and a project that did
# find_package(lathe CONFIG REQUIRED): both name lathe's targets lathe::…
# (aliases in the one, the installed package's targets in the other).
function(lathe_add_model target)
  cmake_parse_arguments(ARG "" "SPEC;DRAFT" "" ${ARGN})
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
  set(outputs ${out}/model.hpp ${out}/model.cpp ${out}/kernels.cpp)
  set(draft_args "")
  set(draft_spec "")
  set(draft_note "")
  if(ARG_DRAFT)
    get_filename_component(draft_spec ${ARG_DRAFT} ABSOLUTE)
    if(NOT EXISTS ${draft_spec})
      message(FATAL_ERROR "lathe_add_model(${target}): DRAFT ${ARG_DRAFT} does not exist (${draft_spec})")
    endif()
    file(RELATIVE_PATH draft_rel ${PROJECT_SOURCE_DIR} ${draft_spec})
    set(draft_args --draft ${draft_rel})
    set(draft_note " --draft ${draft_rel}")
    list(APPEND outputs ${out}/draft.hpp)
  endif()
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND lathe::lathe gen ${spec_rel} ${draft_args} -o ${out} --quiet
    DEPENDS ${spec} ${draft_spec} $<TARGET_FILE:lathe::lathe>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "lathe gen ${spec_rel}${draft_note}"
    VERBATIM)
  add_library(${target} STATIC ${outputs})
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
