# Every dependency comes from a Debian package; a missing one stops configuration with the package to install.
find_package(PkgConfig QUIET)
if(NOT PkgConfig_FOUND)
  message(FATAL_ERROR "pkg-config not found: install the Debian package 'pkg-config'")
endif()

add_library(lcx_deps INTERFACE)

# lcx_require(<pkg-config module> <Debian package> <why>)
function(lcx_require module debpkg why)
  string(MAKE_C_IDENTIFIER "${module}" id)
  pkg_check_modules(LCXDEP_${id} QUIET IMPORTED_TARGET ${module})
  if(NOT LCXDEP_${id}_FOUND)
    message(FATAL_ERROR "${module} not found (${why}): install the Debian package '${debpkg}'")
  endif()
  target_link_libraries(lcx_deps INTERFACE PkgConfig::LCXDEP_${id})
endfunction()

# jansson: reports line/column/position on parse errors and can reject duplicate object keys.
lcx_require(jansson     libjansson-dev  "JSON: safetensors headers, config.json, manifests")
lcx_require(libzstd     libzstd-dev     "compression of native checkpoints")
lcx_require(libxxhash   libxxhash-dev   "XXH3-64 checksums of checkpoint pieces")
lcx_require(openblas    libopenblas-dev "CPU GEMM")
lcx_require(yaml-0.1    libyaml-dev     "recipes")
lcx_require(libpcre2-8  libpcre2-dev    "tokenizer pre-split regexes")

find_package(OpenMP COMPONENTS C)
if(NOT OpenMP_C_FOUND)
  message(FATAL_ERROR "OpenMP for C not found: install the Debian package 'libgomp1' (part of gcc)")
endif()
target_link_libraries(lcx_deps INTERFACE OpenMP::OpenMP_C)

find_package(MPI COMPONENTS C)
if(NOT MPI_C_FOUND)
  message(FATAL_ERROR "MPI not found: install the Debian packages 'libopenmpi-dev openmpi-bin'")
endif()
target_link_libraries(lcx_deps INTERFACE MPI::MPI_C)
set(LCX_MPIEXEC "${MPIEXEC_EXECUTABLE}" CACHE INTERNAL "")

find_package(Threads REQUIRED)
target_link_libraries(lcx_deps INTERFACE Threads::Threads)

# zlib (optional): `lcextend tokenize` reads gzip-compressed inputs (*.jsonl.gz) where it is there.
pkg_check_modules(LCXDEP_zlib QUIET IMPORTED_TARGET zlib)
if(LCXDEP_zlib_FOUND)
  target_link_libraries(lcx_deps INTERFACE PkgConfig::LCXDEP_zlib)
  target_compile_definitions(lcx_deps INTERFACE LCX_HAVE_ZLIB=1)
else()
  message(STATUS "zlib not found: tokenize reads no .gz inputs (install the Debian package 'zlib1g-dev')")
endif()
