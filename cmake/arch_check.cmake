# arch_check.cmake -- the compiles of the architecture check (it_arch_check,
# scripts/check_arch.sh) as build steps: target attune_arch_check, not
# part of `all`, built by `make test` together with everything else (issue
# 28 item 5). One custom command per kernel file and architecture, each
# `scripts/check_arch.sh --compile ARCH FILE LOG` (nvcc -cubin -Xptxas -v,
# the flags written once, in that script), so
#   - make schedules them beside the C and CUDA build instead of after it,
#     both cores busy (they were ~90 s of the tests' CPU, two processes,
#     beside tests timing kernels);
#   - each is done once per architecture and file and redone only when a
#     file it read changed (nvcc's depfile): the cache is make's;
#   - the test only reads what ptxas said (check_arch.sh --logs), after
#     building this target, a no-op once make test has.
# Architectures: ATTUNE_CHECK_ARCHS (CMakeLists.txt; default 87 110: Orin
# and Thor), those this nvcc can build; the check notes the others as not
# checked. An architecture the build itself compiles the CUDA backend for
# (CMAKE_CUDA_ARCHITECTURES: on a host without a GPU, by default, these)
# is not compiled again: the backend's objects are compiled through
# scripts/cuda_launcher.sh with -Xptxas=-v, which keeps ptxas's report of
# each file per architecture in the same place, and the check reads the
# compile that ships.
set(ATTUNE_ARCH_CHECK_LOGS ${CMAKE_BINARY_DIR}/arch-check/logs)
add_custom_target(attune_arch_check)
if(ATTUNE_HAVE_CUDA AND CMAKE_CUDA_COMPILER)
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch
                  OUTPUT_VARIABLE _gpu_archs ERROR_QUIET)
  file(GLOB_RECURSE _check_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/*.cu)
  list(SORT _check_sources)
  set(_check_logs)
  set(_shared_archs)
  foreach(a ${ATTUNE_CHECK_ARCHS})
    if(NOT _gpu_archs MATCHES "compute_${a}\n")
      continue()
    endif()
    set(_shared OFF)
    if(TARGET attune_cuda AND a IN_LIST CMAKE_CUDA_ARCHITECTURES)
      set(_shared ON)
      list(APPEND _shared_archs ${a})
    endif()
    foreach(f ${_check_sources})
      if(_shared AND f IN_LIST ATTUNE_CUDA_SOURCES)
        continue() # compiled by the build (attune_cuda), its report kept
      endif()
      # the name check_arch.sh's log_name gives: the path under kernels/, / as __
      file(RELATIVE_PATH _rel ${CMAKE_SOURCE_DIR}/kernels ${f})
      string(REPLACE "/" "__" _name ${_rel})
      set(_log ${ATTUNE_ARCH_CHECK_LOGS}/sm_${a}/${_name}.log)
      add_custom_command(OUTPUT ${_log}
        COMMAND ${CMAKE_COMMAND} -E env NVCC=${CMAKE_CUDA_COMPILER}
                ${CMAKE_SOURCE_DIR}/scripts/check_arch.sh --compile ${a} ${f} ${_log}
        DEPENDS ${f} ${CMAKE_SOURCE_DIR}/scripts/check_arch.sh
        DEPFILE ${_log}.d
        COMMENT "Checking ${_rel} for sm_${a}"
        VERBATIM)
      list(APPEND _check_logs ${_log})
    endforeach()
  endforeach()
  if(_check_logs)
    add_custom_target(attune_arch_check_compile DEPENDS ${_check_logs})
    add_dependencies(attune_arch_check attune_arch_check_compile)
  endif()
  if(_shared_archs)
    set_property(TARGET attune_cuda PROPERTY CUDA_COMPILER_LAUNCHER
                 ${CMAKE_SOURCE_DIR}/scripts/cuda_launcher.sh ${ATTUNE_ARCH_CHECK_LOGS}
                 ${CMAKE_CUDA_COMPILER_LAUNCHER})
    target_compile_options(attune_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
    add_dependencies(attune_arch_check attune_cuda)
    message(STATUS "attune: the architecture check reads the build's compiles for: ${_shared_archs}")
  endif()
  # The sm_90a object (the wgmma kernels) through the same launcher, with
  # ptxas's report: LOGS/sm_90a/cuda__cuda_fused_sm90a.cu.log, where the
  # check looks for wgmma that ptxas serialised (scripts/check_arch.sh).
  if(TARGET attune_cuda_sm90a)
    set_property(TARGET attune_cuda_sm90a PROPERTY CUDA_COMPILER_LAUNCHER
                 ${CMAKE_SOURCE_DIR}/scripts/cuda_launcher.sh ${ATTUNE_ARCH_CHECK_LOGS}
                 ${CMAKE_CUDA_COMPILER_LAUNCHER})
    target_compile_options(attune_cuda_sm90a PRIVATE -Xptxas=-v)
    add_dependencies(attune_arch_check attune_cuda_sm90a)
  endif()
endif()
