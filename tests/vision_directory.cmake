# A Hugging Face vision model's directory in ${WORK_DIR}/model, made afresh
# (WORK_DIR emptied, LATHE_CACHE_DIR under it): the files of ${DATA}
# (tokenizer, chat template, image processor's settings), config.json
# written from ${SPEC} by ${TWIN}, random weights of the spec's own build
# ${EXE}. Included by the scripts of the vision CLI tests, after
# run_command.cmake.
set(ENV{LATHE_CACHE_DIR} ${WORK_DIR}/cache)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(COPY ${DATA}/ DESTINATION ${WORK_DIR}/model)
run(out ${TWIN} config ${SPEC} model/config.json)
run(out ${EXE} random-weights -o model/model.safetensors --seed 7)
