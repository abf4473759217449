# Finds LibTorch inside the PyTorch wheel that scripts/install-deps.sh
# installs: python3 tells where its CMake package lives.
if(NOT Torch_DIR)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
            "import torch, sys; sys.stdout.write(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE SACPLAN_TORCH_PREFIX
    ERROR_QUIET
    RESULT_VARIABLE SACPLAN_TORCH_FOUND)
  if(NOT SACPLAN_TORCH_FOUND EQUAL 0)
    message(FATAL_ERROR
      "SACPLAN_WITH_TORCH is ON but python3 cannot import torch: run "
      "scripts/install-deps.sh, or configure with -DSACPLAN_WITH_TORCH=OFF")
  endif()
  list(APPEND CMAKE_PREFIX_PATH ${SACPLAN_TORCH_PREFIX})
endif()
# The CUDA wheel's CMake config probes the local GPU to pick architectures
# unless told; build machines have none, so name the Hopper and Ampere ones.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;9.0")
endif()
find_package(Torch REQUIRED)
