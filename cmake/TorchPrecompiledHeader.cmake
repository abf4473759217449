# One precompiled header of LibTorch's headers, reused by every C++ target
# that links LibTorch, directly or through a sacplan library.
#
# Why: parsing those headers is most of a torch-using source's compile time.
# On a quiet machine here executor/src/training.cc compiled in 27.4 s
# without it and 11.4 s with it; 49 of the 54 sources that get it include
# LibTorch, and CI builds them all on two cores. The other 5 (CUPTI code
# in torch-linking targets) pay for loading it: 4.6 s -> 9.1 s for
# cupti_collector.cc. A precompiled header never changes what compiles:
# where GCC cannot use it (other flags), it reads the headers as text.

# The headers: those that the torch-using sources of the project include
# most (checked with grep), none that needs the CUDA toolkit's headers.
set(SACPLAN_TORCH_PCH_HEADERS
  <ATen/ATen.h>
  <ATen/Parallel.h>
  <torch/csrc/autograd/autograd.h>
  <torch/csrc/autograd/custom_function.h>
  <torch/optim/adamw.h>)

# Sets `result` to TRUE when `target` links the `torch` target, following
# the project's own (non-imported) libraries and aliases.
function(_sacplan_links_torch target result)
  get_property(known GLOBAL PROPERTY "SACPLAN_LINKS_TORCH_${target}" SET)
  if(known)
    get_property(links GLOBAL PROPERTY "SACPLAN_LINKS_TORCH_${target}")
    set(${result} ${links} PARENT_SCOPE)
    return()
  endif()
  # Marked before the walk, so that a link cycle ends.
  set_property(GLOBAL PROPERTY "SACPLAN_LINKS_TORCH_${target}" FALSE)
  get_target_property(type ${target} TYPE)
  set(deps)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(direct ${target} LINK_LIBRARIES)
    if(direct)
      list(APPEND deps ${direct})
    endif()
  endif()
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(interface)
    list(APPEND deps ${interface})
  endif()
  set(links FALSE)
  foreach(dep IN LISTS deps)
    # A static library's private dependencies appear as $<LINK_ONLY:name>.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.+)>$" "\\1" dep "${dep}")
    if(dep STREQUAL "torch")
      set(links TRUE)
      break()
    endif()
    if(NOT TARGET "${dep}")
      continue()
    endif()
    get_target_property(aliased "${dep}" ALIASED_TARGET)
    if(aliased)
      set(dep ${aliased})
    endif()
    get_target_property(imported "${dep}" IMPORTED)
    if(imported)
      continue()
    endif()
    _sacplan_links_torch("${dep}" dep_links)
    if(dep_links)
      set(links TRUE)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "SACPLAN_LINKS_TORCH_${target}" ${links})
  set(${result} ${links} PARENT_SCOPE)
endfunction()

function(_sacplan_targets_under dir result)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _sacplan_targets_under(${subdir} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${result} ${targets} PARENT_SCOPE)
endfunction()

# Call once, after every target is defined. Builds the header once (target
# sacplan_torch_pch) and gives it to every library and executable under
# this directory that links LibTorch and compiles C++.
function(sacplan_share_torch_pch)
  add_library(sacplan_torch_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cc)
  target_link_libraries(sacplan_torch_pch PRIVATE torch)
  target_precompile_headers(sacplan_torch_pch PRIVATE ${SACPLAN_TORCH_PCH_HEADERS})
  _sacplan_targets_under(${CMAKE_CURRENT_SOURCE_DIR} targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(target STREQUAL "sacplan_torch_pch" OR
       NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.(cc|cpp)$")
    if(NOT sources)
      continue()
    endif()
    _sacplan_links_torch(${target} links)
    if(links)
      target_precompile_headers(${target} REUSE_FROM sacplan_torch_pch)
    endif()
  endforeach()
endfunction()
