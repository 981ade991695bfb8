# logreg on an HDF5 set larger than the memory cap (streamed) against the in-memory run, bitwise; the
# caps' minimum, a NaN in a chunk, the file truncated while it streams. gpu: the device cap, from the
# file and from pinned host memory, f32 and f64, on one GPU (exit 77 without).
add_test(NAME stream_logreg COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_stream_logreg.sh $<TARGET_FILE:dsolve> ${MPIEXEC_EXECUTABLE} cpu)
set_tests_properties(stream_logreg PROPERTIES ENVIRONMENT "${ds_test_env}" SKIP_RETURN_CODE 77 PROCESSORS 2 TIMEOUT 600)
if(DSOLVE_CUDA)
  add_test(NAME stream_logreg_gpu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_stream_logreg.sh $<TARGET_FILE:dsolve> ${MPIEXEC_EXECUTABLE} gpu)
  set_tests_properties(stream_logreg_gpu PROPERTIES ENVIRONMENT "${ds_test_env}" SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600)
endif()
