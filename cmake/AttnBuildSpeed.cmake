# Build-time helpers: precompiled headers and unity batches (see docs/ci.md for what they save).
#
#   include(AttnBuildSpeed)
#   attn_speed_up(attn)              # PCH of the heavy STL + nlohmann/json headers, unity batches
#   attn_speed_up(attn_cli NO_PCH)   # unity batches only (too few files to repay a PCH)
#   attn_test_pch(attn_test_pch)     # one PCH (gtest + json + STL) that every test REUSE_FROMs
#
# Options: ATTN_PCH (default ON), ATTN_UNITY (default ON), ATTN_UNITY_BATCH (default 8).
# Turn both off (-DATTN_PCH=OFF -DATTN_UNITY=OFF) to check that each file includes what it uses.
#
# Left out of unity batches, by rule: files with their own ISA flags (*_avx2.cpp, *_avx512.cpp),
# and kernel TUs that #define ATTN_KERNEL_TU before their includes (the macro would leak into the
# files after them in a batch). The kernels compiled once per ISA (src/backend/cpu/isa/) are not
# sources of the library target at all: CMakeLists.txt builds them as object libraries. A source can opt out with the SKIP_UNITY_BUILD_INCLUSION property;
# ATTN_UNITY_SKIP lists those whose file-local names (anonymous namespace) clash with another file's.
include_guard(GLOBAL)

option(ATTN_PCH "Precompiled headers for the library, CLI and tests" ON)
option(ATTN_UNITY "Unity (jumbo) build of the library and CLI" ON)
set(ATTN_UNITY_BATCH 8 CACHE STRING "Source files per unity translation unit")

# External headers only: attn's own headers change often and must stay self-contained.
set(ATTN_PCH_HEADERS
  <algorithm> <array> <atomic> <cmath> <cstdint> <cstdio> <cstdlib> <cstring> <filesystem>
  <fstream> <functional> <limits> <map> <memory> <mutex> <numeric> <optional> <set> <sstream>
  <stdexcept> <string> <string_view> <unordered_map> <unordered_set> <utility> <vector>
  <nlohmann/json.hpp>)

# Each of these defines a file-local helper (anonymous namespace or static) with the same name and
# signature, in the same namespace, as another library file, which would be a redefinition in a
# shared batch: gemm_onednn (Prim, g_mu, g_cache ~ conv_onednn), models/pretrained/vit_{hf,timm,
# torchvision} (contains ~ vit_foreign), ops/{norm,softmax} (row_grain ~ fused), ops/{combine,indexing}
# (wrap_dim, prod ~ core/tensor), ops/pool (pair_shape ~ ops/conv), data/text_pairs (lower ~
# sword). Found by scanning every file's top-level names (same
# name in different namespaces, or different parameter lists, is harmless). Renaming the helpers
# or moving them to a shared header would let these files join the batches. src/dist/ is compiled on
# its own so that MPI's include path and define stay on its files (CMakeLists.txt).
set(ATTN_UNITY_SKIP
  src/backend/cpu/gemm_onednn.cpp src/models/pretrained/vit_hf.cpp src/models/pretrained/vit_timm.cpp
  src/models/pretrained/vit_torchvision.cpp src/ops/norm.cpp src/ops/softmax.cpp src/ops/combine.cpp
  src/ops/indexing.cpp src/ops/pool.cpp src/data/text_pairs.cpp
  src/dist/comm.cpp src/dist/mpi_comm.cpp src/dist/grad_reducer.cpp)

# Sources that must be compiled on their own (no PCH/unity): own ISA flags or ATTN_KERNEL_TU.
function(_attn_isolated_sources out)
  set(result "")
  foreach(src ${ARGN})
    if(src MATCHES "^\\$<")   # $<TARGET_OBJECTS:...>: objects built elsewhere
      continue()
    endif()
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    if(src MATCHES "_(avx2|avx512)\\.cpp$" OR rel IN_LIST ATTN_UNITY_SKIP)
      list(APPEND result ${src})
    else()
      file(STRINGS ${src} kernel_tu REGEX "^#define ATTN_KERNEL_TU")
      if(kernel_tu)
        list(APPEND result ${src})
      endif()
    endif()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

function(attn_speed_up target)
  cmake_parse_arguments(arg "NO_PCH" "" "" ${ARGN})
  get_target_property(sources ${target} SOURCES)
  _attn_isolated_sources(isolated ${sources})
  if(ATTN_PCH AND NOT arg_NO_PCH)
    target_precompile_headers(${target} PRIVATE ${ATTN_PCH_HEADERS})
    # A PCH made without -mavx512f is rejected by a TU compiled with it: skip the ISA files.
    foreach(src ${isolated})
      if(src MATCHES "_(avx2|avx512)\\.cpp$")
        set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endif()
  if(ATTN_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ATTN_UNITY_BATCH})
    if(isolated)
      set_source_files_properties(${isolated} TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endif()
endfunction()

# An object library holding the tests' shared PCH (gtest + json + STL): each test binary uses it
# with attn_test_use_pch(). GCC refuses a PCH built with other -fPIC/-fPIE flags, so the holder and
# the test executables both leave PIC to the compiler's default.
function(attn_test_pch target)
  if(NOT ATTN_PCH)
    return()
  endif()
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${target}.cpp
       CONTENT "// holds the tests' precompiled header\n")
  add_library(${target} OBJECT ${CMAKE_CURRENT_BINARY_DIR}/${target}.cpp)
  target_link_libraries(${target} PRIVATE attn GTest::gtest nlohmann_json::nlohmann_json)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR}/support)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(${target} PRIVATE ${ATTN_TEST_COMPILE_OPTIONS})  # as the tests that reuse it
  target_precompile_headers(${target} PRIVATE ${ATTN_PCH_HEADERS} <gtest/gtest.h>)
endfunction()

function(attn_test_use_pch target holder)
  if(ATTN_PCH)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_precompile_headers(${target} REUSE_FROM ${holder})
  endif()
endfunction()
