# cmake -DBINARY=<path> -P check_no_torch_libs.cmake
# Fails when the planning executable would load LibTorch or CUDA: any shared
# object that `ldd` resolves for it (directly or through another) whose name
# is one of LibTorch's or CUDA's.
execute_process(COMMAND ldd ${BINARY}
  OUTPUT_VARIABLE libs ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed (${rc}): ${errors}")
endif()
# The check means something only if ldd listed the libraries at all.
if(NOT libs MATCHES "libc\\.so")
  message(FATAL_ERROR "ldd ${BINARY} listed no libc: ${libs}")
endif()
string(REGEX MATCHALL
  "[^\n]*(libtorch|libc10|libcuda|libcudart|libcupti|libnvrtc|libnccl|libcudnn|libcublas|libnvToolsExt)[^\n]*"
  heavy "${libs}")
if(heavy)
  list(JOIN heavy "\n" heavy_lines)
  message(FATAL_ERROR "${BINARY} loads LibTorch/CUDA libraries:\n${heavy_lines}")
endif()
string(REGEX MATCHALL "\n" lines "${libs}")
list(LENGTH lines count)
message(STATUS "${BINARY}: ${count} shared objects, none from LibTorch or CUDA")
