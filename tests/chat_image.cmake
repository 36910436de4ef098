# chat's /image on the tiny LLaVA (its checkpoint directory of cli.vision_*):
# the image's rows go with the next line, before its text, and the
# continuation is generate's for the prompt "<image>" + that line with the
# same image; a /image without a file, a missing file and a line whose
# markers are not the images waiting are refused with a message, the
# conversation going on; a model without a tower refuses /image.
# -DEXE (vision model executable) -DTEXT_EXE -DTEXT_WEIGHTS (a text model's) -DDIR -DIMAGE -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(MAKE_DIRECTORY ${WORK_DIR})
set(options -w ${DIR} -n 6 --temp 0)

file(WRITE ${WORK_DIR}/one.txt "/image ${IMAGE}\nWhat is it?\n")
run(chat ${EXE} chat ${options} INPUT_FILE ${WORK_DIR}/one.txt)
if(NOT chat_err MATCHES "${IMAGE}: with the next line")
  message(FATAL_ERROR "chat did not take the image: ${chat_err}")
endif()
run(generated ${EXE} generate ${options} -p "<image>What is it?\n" --image ${IMAGE} --stop "\n")
if(NOT generated STREQUAL "<image>What is it?\n${chat}")
  message(FATAL_ERROR "chat with /image wrote\n${chat}\ngenerate with --image\n${generated}")
endif()
file(WRITE ${WORK_DIR}/none.txt "What is it?\n")
run(text_only ${EXE} chat ${options} INPUT_FILE ${WORK_DIR}/none.txt)
if(text_only STREQUAL chat)
  message(FATAL_ERROR "the image changed nothing: ${chat}")
endif()

file(WRITE ${WORK_DIR}/bad.txt "/image\n/image ${WORK_DIR}/missing.png\n/image ${IMAGE}\n<image> and <image>?\nWhat is it?\n")
run(out ${EXE} chat ${options} INPUT_FILE ${WORK_DIR}/bad.txt)
foreach(expected "/image needs a file" "missing.png" "holds 2 image marker\\(s\\) \\(token 200\\) for 1 image\\(s\\)[^\n]*not sent")
  if(NOT out_err MATCHES "${expected}")
    message(FATAL_ERROR "chat did not refuse (${expected}): ${out_err}")
  endif()
endforeach()
# The refused line leaves the image waiting: the last line takes it.
if(NOT out STREQUAL chat)
  message(FATAL_ERROR "after the refusals, chat wrote\n${out}\nnot\n${chat}")
endif()

run(out ${TEXT_EXE} chat -w ${TEXT_WEIGHTS} -n 2 --temp 0 INPUT_FILE ${WORK_DIR}/one.txt)
if(NOT out_err MATCHES "takes no images")
  message(FATAL_ERROR "a text model took /image: ${out_err}")
endif()
