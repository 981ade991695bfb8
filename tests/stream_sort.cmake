# sort of keys beyond the memory caps (streamed) against the in-memory run: the CPU backend on 1 and 3
# ranks (--host-memory 64M on a 400 MB file); gpu: one GPU under --device-memory 64M (label gpu).
add_test(NAME stream_sort_cli
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_stream_sort_cli.sh $<TARGET_FILE:dsolve> ${MPIEXEC_EXECUTABLE} cpu)
set_tests_properties(stream_sort_cli PROPERTIES ENVIRONMENT "${ds_test_env}" SKIP_RETURN_CODE 77 PROCESSORS 2 TIMEOUT 600)
if(DSOLVE_CUDA)
  add_test(NAME stream_sort_cli_gpu
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_stream_sort_cli.sh $<TARGET_FILE:dsolve> ${MPIEXEC_EXECUTABLE} gpu)
  set_tests_properties(stream_sort_cli_gpu PROPERTIES ENVIRONMENT "${ds_test_env}" SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600)
endif()
