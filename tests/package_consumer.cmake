# The installed package: `cmake --install` of lathe's build into a fresh
# prefix, then examples/consumer (find_package(lathe CONFIG REQUIRED),
# lathe_add_model) configured and built against it, and its programs run;
# then the installed lathe builds and runs a spec by itself (its headers,
# libraries and toolchain under the prefix).
# -DBUILD_DIR -DCONSUMER (examples/consumer) -DWORK_DIR -DGENERATOR
cmake_policy(SET CMP0054 NEW)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(ENV{LATHE_CACHE_DIR} ${WORK_DIR}/cache)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
set(prefix ${WORK_DIR}/prefix)
run(out ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run(out ${CMAKE_COMMAND} -S ${CONSUMER} -B consumer -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
        -DCMAKE_BUILD_TYPE=Release)
run(out ${CMAKE_COMMAND} --build consumer -j2)
run(info consumer/bin/mymodel info)
if(NOT info MATCHES "model +mymodel")
  message(FATAL_ERROR "consumer/bin/mymodel is not the consumer's model: ${info}")
endif()
run(out consumer/bin/mymodel random-weights -o weights.safetensors)
run(hello consumer/bin/hello weights.safetensors)
if(NOT hello MATCHES "^mymodel \\([0-9]+ parameters\\) on .*:( [0-9]+)+\n$")
  message(FATAL_ERROR "consumer/bin/hello: ${hello}")
endif()
run(ids ${prefix}/bin/lathe run ${CONSUMER}/mymodel.toml -w weights.safetensors -t 1,2,3 -n 8)
string(REGEX REPLACE "^.*:" "" hello_ids "${hello}")
string(STRIP "${hello_ids}" hello_ids)
string(STRIP "${ids}" ids)
if(NOT ids MATCHES "(^| )${hello_ids}$")
  message(FATAL_ERROR "the installed lathe run gave '${ids}', the consumer's program '${hello_ids}'")
endif()
