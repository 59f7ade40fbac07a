# sp_simt_kernel_source(<out> [FAULT <name>])
#
# Writes agent/cuda/src/grad_stats_kernels.cu to <out> as C++ for the SIMT emulator, at configure time:
# each `kernel<<<config>>>(args)` becomes `::simt::launch(::simt::LaunchConfig{config}, kernel, args)`,
# nothing else changes (a #line directive keeps diagnostics and sanitizer reports on the real file's
# lines). FAULT plants one of the deliberate faults below; configure fails if its text is not in the
# source, so the faults follow the real kernels as they change.
set(SP_SIMT_KERNEL_CU ${PROJECT_SOURCE_DIR}/agent/cuda/src/grad_stats_kernels.cu)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${SP_SIMT_KERNEL_CU})

# The deliberate faults, by name: the exact text in the real source and what replaces it.
function(sp_simt_fault name old_var new_var)
  if(name STREQUAL "wrong_shuffle_offset")  # the warp sum starts at lane distance 8: lanes 16-31 lost
    set(old "for (int off = kWarpSize / 2; off > 0; off >>= 1)")
    set(new "for (int off = kWarpSize / 4; off > 0; off >>= 1)")
  elseif(name STREQUAL "missing_syncthreads")  # thread 0 reads the per-warp sums before they are written
    set(old "if (lane == 0) warps[warp] = a;\n    __syncthreads();")
    set(new "if (lane == 0) warps[warp] = a;")
  elseif(name STREQUAL "missing_tree_syncthreads")  # the merge tree's levels are not separated
    set(old "kernel::merge(tree[threadIdx.x], tree[threadIdx.x + half]);\n        __syncthreads();")
    set(new "kernel::merge(tree[threadIdx.x], tree[threadIdx.x + half]);")
  elseif(name STREQUAL "tree_skips_last_level")  # tree[1] is never merged into tree[0]
    set(old "for (int half = kMergeThreads / 2; half > 0; half >>= 1)")
    set(new "for (int half = kMergeThreads / 2; half > 1; half >>= 1)")
  elseif(name STREQUAL "tree_skips_first_level")  # threads 128-255 are never merged
    set(old "for (int half = kMergeThreads / 2; half > 0; half >>= 1)")
    set(new "for (int half = kMergeThreads / 4; half > 0; half >>= 1)")
  elseif(name STREQUAL "chunk_index_off_by_one")  # each block's chunk range starts one chunk late
    set(old "kernel::merge_strided(partials, first_chunk[blockIdx.x], ")
    set(new "kernel::merge_strided(partials, first_chunk[blockIdx.x] + 1, ")
  elseif(name STREQUAL "results_without_event_wait")  # the host reads pinned results the stream may still write
    set(old "    check(cudaEventSynchronize(m.done), \"cudaEventSynchronize\");\n    m.out.assign(")
    set(new "    m.out.assign(")
  else()
    message(FATAL_ERROR "sp_simt_fault: unknown fault ${name}")
  endif()
  set(${old_var} "${old}" PARENT_SCOPE)
  set(${new_var} "${new}" PARENT_SCOPE)
endfunction()

# sp_simt_kernel_source(<out> [FAULT <name>])
function(sp_simt_kernel_source out)
  cmake_parse_arguments(K "" "FAULT" "" ${ARGN})
  file(READ ${SP_SIMT_KERNEL_CU} src)
  if(K_FAULT)
    sp_simt_fault(${K_FAULT} old new)
    string(FIND "${src}" "${old}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "fault ${K_FAULT}: its text is no longer in ${SP_SIMT_KERNEL_CU}:\n${old}")
    endif()
    string(REPLACE "${old}" "${new}" src "${src}")
  endif()
  string(REGEX REPLACE "([A-Za-z_][A-Za-z_0-9:]*)<<<([^<>]*)>>>\\(" "::simt::launch(::simt::LaunchConfig{\\2}, \\1, "
         src "${src}")
  string(FIND "${src}" "<<<" left)
  if(NOT left EQUAL -1)
    message(FATAL_ERROR "sp_simt_kernel_source(${out}): a launch in ${SP_SIMT_KERNEL_CU} was not rewritten")
  endif()
  set(src "// Generated from ${SP_SIMT_KERNEL_CU} by tests/gpu/simt/kernel_source.cmake: do not edit.\n#line 1 \"${SP_SIMT_KERNEL_CU}\"\n${src}")
  if(EXISTS ${out})
    file(READ ${out} old_src)
  endif()
  if(NOT old_src STREQUAL src)  # unchanged output keeps its timestamp: no rebuild
    file(WRITE ${out} "${src}")
  endif()
endfunction()
