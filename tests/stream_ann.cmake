# ann and predict from an HDF5 input larger than the memory cap (streamed) against the in-memory runs
# (tests/test_stream_ann.sh); gpu: the device cap on one GPU, from the file and from pinned host memory
# (exit 77 without).
add_test(NAME stream_ann COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_stream_ann.sh $<TARGET_FILE:dsolve> ${MPIEXEC_EXECUTABLE} cpu)
set_tests_properties(stream_ann PROPERTIES ENVIRONMENT "${ds_test_env}" SKIP_RETURN_CODE 77 PROCESSORS 2 TIMEOUT 600)
if(DSOLVE_CUDA)
  add_test(NAME stream_ann_gpu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_stream_ann.sh $<TARGET_FILE:dsolve> ${MPIEXEC_EXECUTABLE} gpu)
  set_tests_properties(stream_ann_gpu PROPERTIES ENVIRONMENT "${ds_test_env}" SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600)
endif()
