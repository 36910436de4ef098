# `logits -t IDS --image FILE -n 2` of a vision model's checkpoint
# directory: the ids hold the image's marker once; the file holds the rows
# of the other ids (not the image's, nor the tokens the expansion writes
# around the image and its rows), then two steps', and the message counts
# them.
# -DEXE (the model executable) -DDIR (its checkpoint directory) -DIDS
# (comma-separated, one marker among them) -DIMAGE; -DMARKER_ROWS=1: the
# marker's row is written too (a decoder that cross-attends to the image)
set(WORK_DIR ${DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)

string(REPLACE "," ";" ids "${IDS}")
list(LENGTH ids count)
if(NOT DEFINED MARKER_ROWS)
  set(MARKER_ROWS 0)
endif()
math(EXPR rows "${count} - 1 + ${MARKER_ROWS} + 2")
run(out ${EXE} logits -w ${DIR} -t ${IDS} -n 2 -o ${DIR}/logits.bin --image ${IMAGE})
if(NOT out_err MATCHES "wrote ${rows} rows × ([0-9]+) f32 logits")
  message(FATAL_ERROR "logits --image did not say ${rows} rows: ${out_err}")
endif()
file(SIZE ${DIR}/logits.bin bytes)
math(EXPR want "${rows} * ${CMAKE_MATCH_1} * 4")
if(NOT bytes EQUAL want)
  message(FATAL_ERROR "logits.bin holds ${bytes} bytes, not ${rows} rows of ${CMAKE_MATCH_1} f32 (${want})")
endif()
