# find_package(lathe CONFIG REQUIRED) — the installed lathe:
#   lathe::generate, lathe::text,             the runtime libraries (sampling and
#   lathe::runtime, lathe::core               generation, tokenizers and chat
#                                             templates, sessions, weights)
#   lathe::model_main                         the model executables' front end
#   lathe::lathe                              the lathe tool
#   lathe_add_model(<target> SPEC <spec.toml>)  a model library and executable
include(${CMAKE_CURRENT_LIST_DIR}/RuntimeDependencies.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/latheTargets.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/LatheModel.cmake)
