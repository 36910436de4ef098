# lathe_embed_files(<output.cpp> <function> <files>...): a C++ source that
# defines `std::string_view <function>(std::string_view name)` returning the
# contents of each file by its base name (empty when unknown). Rebuilt when a
# file changes, so the generator always carries the current templates/ and
# shaders/, and everything generated from them is regenerated.
function(lathe_embed_files output function)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DFUNCTION=${function} "-DFILES=${ARGN}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedScript.cmake
    DEPENDS ${ARGN} ${PROJECT_SOURCE_DIR}/cmake/EmbedScript.cmake
    COMMENT "Embedding ${function}"
    VERBATIM)
endfunction()
