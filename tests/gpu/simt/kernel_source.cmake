# sp_simt_kernel_source(<out> [CU <file>] [FAULT <name>] [INCLUDE_DIR_VAR <var>])
#
# Writes a kernel source (CU, default agent/cuda/src/grad_stats_kernels.cu) to <out> as C++ for the
# SIMT emulator, at configure time: each `kernel<<<config>>>(args)` becomes
# `::simt::launch(::simt::LaunchConfig{config}, kernel, args)`, nothing else changes (a #line directive
# keeps diagnostics and sanitizer reports on the real file's lines). FAULT plants one of the deliberate
# faults below; configure fails if its text is not in the source, so the faults follow the real
# kernels as they change. A fault in a header the kernel includes (the shared per-element math) is
# written to a folder of its own, returned in INCLUDE_DIR_VAR, which the kernel target puts first on
# its include path.
set(SP_SIMT_CUDA_SRC ${PROJECT_SOURCE_DIR}/agent/cuda/src)
set(SP_SIMT_KERNEL_CU ${SP_SIMT_CUDA_SRC}/grad_stats_kernels.cu)
set(SP_SIMT_DEQUANT_CU ${SP_SIMT_CUDA_SRC}/dequantize_kernels.cu)
set(SP_SIMT_DEQUANT_MATH ${SP_SIMT_CUDA_SRC}/dequantize_math.h)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${SP_SIMT_KERNEL_CU} ${SP_SIMT_DEQUANT_CU}
                                                               ${SP_SIMT_DEQUANT_MATH})

# The deliberate faults, by name: the file, the exact text in it and what replaces it.
function(sp_simt_fault name file_var old_var new_var)
  set(file ${SP_SIMT_KERNEL_CU})
  if(name MATCHES "^dq_")
    set(file ${SP_SIMT_DEQUANT_MATH})
  endif()
  if(name STREQUAL "dq_int8_first_row_scale")  # every row scaled by row 0's scale
    set(old "const float scale = t.scales[row];")
    set(new "const float scale = t.scales[0];")
  elseif(name STREQUAL "dq_int4_nibble_order")  # even columns read the high nibble
    set(old "(col & 1) ? (byte >> 4) : (byte & 0xF)")
    set(new "(col & 1) ? (byte & 0xF) : (byte >> 4)")
  elseif(name STREQUAL "dq_int4_groups_floor")  # groups per row rounded down: wrong where a group does not divide a row
    set(old "const std::int64_t groups_per_row = (t.cols + t.group - 1) / t.group;")
    set(new "const std::int64_t groups_per_row = t.cols / t.group;")
  elseif(name STREQUAL "dq_e4m3_bias")  # E4M3 exponent bias 8 instead of 7
    set(old "(field - 7u + 127u)")
    set(new "(field - 8u + 127u)")
  elseif(name STREQUAL "dq_e5m2_subnormal_scale")  # E5M2 subnormals m * 2^-15 instead of 2^-16
    set(old "float_from_bits(std::uint32_t(127 - 16) << 23)")
    set(new "float_from_bits(std::uint32_t(127 - 15) << 23)")
  elseif(name STREQUAL "dq_bf16_truncates")  # BF16 output truncated instead of rounded to nearest even
    set(old "    bits += 0x7FFFu + ((bits >> 16) & 1u);\n")
    set(new "")
  elseif(name STREQUAL "dq_tile_tail_lost")  # each thread writes 3 of its 4 columns per tile
    set(file ${SP_SIMT_DEQUANT_CU})
    set(old "for (int k = 0; k < kElemsPerThread; ++k)")
    set(new "for (int k = 0; k < kElemsPerThread - 1; ++k)")
  elseif(name STREQUAL "dq_batch_last_tile_lost")  # a batch's last tile is never written
    set(file ${SP_SIMT_DEQUANT_CU})
    set(old "const std::int64_t n_tiles = batch.first_tile[batch.count];")
    set(new "const std::int64_t n_tiles = batch.first_tile[batch.count] - 1;")
  elseif(name STREQUAL "wrong_shuffle_offset")  # the warp sum starts at lane distance 8: lanes 16-31 lost
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
  set(${file_var} "${file}" PARENT_SCOPE)
  set(${old_var} "${old}" PARENT_SCOPE)
  set(${new_var} "${new}" PARENT_SCOPE)
endfunction()

# Writes `text` to `path` unless it already holds it (an unchanged file keeps its timestamp: no rebuild).
function(sp_simt_write_if_changed path text)
  set(old_text "")
  if(EXISTS ${path})
    file(READ ${path} old_text)
  endif()
  if(NOT old_text STREQUAL text)
    file(WRITE ${path} "${text}")
  endif()
endfunction()

# Reads `file`, plants `old` -> `new` in it (configure fails when `old` is missing), into `out_var`.
function(sp_simt_plant file old new out_var)
  file(READ ${file} src)
  string(FIND "${src}" "${old}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "a planted fault's text is no longer in ${file}:\n${old}")
  endif()
  string(REPLACE "${old}" "${new}" src "${src}")
  set(${out_var} "${src}" PARENT_SCOPE)
endfunction()

# sp_simt_kernel_source(<out> [CU <file>] [FAULT <name>] [INCLUDE_DIR_VAR <var>])
function(sp_simt_kernel_source out)
  cmake_parse_arguments(K "" "CU;FAULT;INCLUDE_DIR_VAR" "" ${ARGN})
  if(NOT K_CU)
    set(K_CU ${SP_SIMT_KERNEL_CU})
  endif()
  file(READ ${K_CU} src)
  if(K_FAULT)
    sp_simt_fault(${K_FAULT} fault_file old new)
    if(fault_file STREQUAL K_CU)
      sp_simt_plant(${K_CU} "${old}" "${new}" src)
    else()
      # A header: its faulty copy goes first on the include path, behind a #line to the real file.
      sp_simt_plant(${fault_file} "${old}" "${new}" header)
      get_filename_component(header_name ${fault_file} NAME)
      set(fault_dir ${out}.include)
      file(MAKE_DIRECTORY ${fault_dir})
      sp_simt_write_if_changed(${fault_dir}/${header_name} "#line 1 \"${fault_file}\"\n${header}")
      if(K_INCLUDE_DIR_VAR)
        set(${K_INCLUDE_DIR_VAR} ${fault_dir} PARENT_SCOPE)
      endif()
    endif()
  endif()
  string(REGEX REPLACE "([A-Za-z_][A-Za-z_0-9:]*)<<<([^<>]*)>>>\\(" "::simt::launch(::simt::LaunchConfig{\\2}, \\1, "
         src "${src}")
  string(FIND "${src}" "<<<" left)
  if(NOT left EQUAL -1)
    message(FATAL_ERROR "sp_simt_kernel_source(${out}): a launch in ${K_CU} was not rewritten")
  endif()
  sp_simt_write_if_changed(${out} "// Generated from ${K_CU} by tests/gpu/simt/kernel_source.cmake: do not edit.\n#line 1 \"${K_CU}\"\n${src}")
endfunction()
