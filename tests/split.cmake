# A model split into pipeline stages gives one device's logits bit for bit,
# in both forms (issue 29): one process over the device opened RANKS times
# (--device 0,0,…), and Open MPI's RANKS ranks on this machine (mpirun
# --oversubscribe, loopback), each a stage on its own copy of the device.
# The MPI half is skipped with a message when mpirun is absent. FAILURES=1
# adds the bad cases: a rank without the checkpoint, and a rank that dies,
# each ending the job with an error, never a hang.
# -DMODEL=<executable> -DRANKS=<n> -DWORK_DIR=<dir> [-DMPIRUN=<mpirun>] [-DFAILURES=1]
file(MAKE_DIRECTORY ${WORK_DIR})
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)  # CI runs as root; mpirun refuses it otherwise
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
execute_process(COMMAND ${MODEL} random-weights -o ${WORK_DIR}/w.safetensors --seed 5 RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "random-weights failed (${rc}): ${err}")
endif()
# A 20-token prompt, then 64 greedy decode steps.
set(prompt 5,0,17,2,9,11,3,8,1,4,7,6,12,10,15,13,14,16,18,19)
set(logits logits -w ${WORK_DIR}/w.safetensors -t ${prompt} -n 64)
function(run name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT rc EQUAL 0 OR err MATCHES "VUID|Validation")
    message(FATAL_ERROR "${name} failed (${rc}): ${out}${err}")
  endif()
endfunction()
function(same name)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/one.f32 ${WORK_DIR}/${name}.f32 RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: the logits differ from one device's")
  endif()
  message(STATUS "${name}: the logits of one device, bit for bit")
endfunction()
run(one ${MODEL} ${logits} -o ${WORK_DIR}/one.f32)
set(devices 0)
foreach(i RANGE 2 ${RANKS})
  string(APPEND devices ",0")
endforeach()
run(devices ${MODEL} ${logits} -o ${WORK_DIR}/devices.f32 --device ${devices})
same(devices)
if(NOT MPIRUN)
  message(STATUS "mpirun not found: the split over MPI ranks is not tested (scripts/install-deps installs openmpi-bin)")
  return()
endif()
set(mpirun ${MPIRUN} --oversubscribe -np)
run(ranks ${mpirun} ${RANKS} ${MODEL} ${logits} -o ${WORK_DIR}/ranks.f32)
same(ranks)
if(NOT FAILURES)
  return()
endif()
# Rank 1 without the checkpoint: its error, and the job ends.
execute_process(COMMAND ${mpirun} 1 ${MODEL} ${logits} -o ${WORK_DIR}/x.f32 : -np 1 ${MODEL} logits
                        -w ${WORK_DIR}/missing.safetensors -t ${prompt} -o ${WORK_DIR}/x.f32
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "\\(rank 1\\): [^\n]*missing.safetensors: cannot open")
  message(FATAL_ERROR "a rank without the checkpoint was not named (${rc}): ${out}${err}")
endif()
# A rank that dies (killed before it starts): the job ends with an error and
# rank 0 does not wait. What mpirun prints about it depends on which it sees
# first (the exit, or the lost connection), so only the ending is checked.
execute_process(COMMAND ${mpirun} 1 ${MODEL} ${logits} -o ${WORK_DIR}/x.f32 : -np 1 sh -c "kill -9 $$"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(rc EQUAL 0 OR "${rc}" MATCHES "timeout|Process terminated")
  message(FATAL_ERROR "a dead rank did not end the job (${rc}): ${out}${err}")
endif()
message(STATUS "a rank without the checkpoint and a dead rank each end the job with an error")
