#!/usr/bin/env bash
# lcextend's Debian libraries for a GPU machine that has nvcc, CMake, a C compiler and PyTorch but no package
# registry. Two uses:
#   bench/gpu_deps.sh fetch [DIR=.gpu-debs]   where apt works: download (not install) the packages into DIR
#                                             (about 25 MB; DIR is listed in .git/info/exclude, never committed)
#   source bench/gpu_deps.sh env [DIR]        on the GPU machine: unpack them into a private prefix
#                                             (/opt/lcxdeps, never over the system's files) and point pkg-config,
#                                             CMake's FindMPI, Open MPI and the loader there; then configure with
#                                             $LCX_DEVICE_CMAKE_ARGS (bench/gpu_session.sh does all of it)
lcx_gd_mode=${1:-}
lcx_gd_dir=${2:-.gpu-debs}
case "$lcx_gd_mode" in
fetch)
    set -euo pipefail
    pk=(libjansson-dev libjansson4 libzstd-dev libzstd1 libxxhash-dev libxxhash0
        libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5
        libyaml-dev libyaml-0-2 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
        libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libhwloc-dev libevent-dev libevent-2.1-7
        libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libpmix-dev libfabric1 libucx0 libibverbs1 librdmacm1
        libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libltdl7 libnuma1 libxnvctrl0 libmunge2
        pkgconf pkgconf-bin pkg-config libpkgconf3 zstd)
    mkdir -p "$lcx_gd_dir"
    [ -n "$(ls /var/lib/apt/lists 2>/dev/null | grep -v lock)" ] || apt-get update -qq
    (cd "$lcx_gd_dir" && for p in "${pk[@]}"; do
        apt-get download -qq "$p" >/dev/null 2>&1 || echo "gpu_deps: could not download $p" >&2
    done)
    mkdir -p .git/info && { grep -qx "/$lcx_gd_dir/" .git/info/exclude 2>/dev/null || echo "/$lcx_gd_dir/" >> .git/info/exclude; }
    echo "gpu_deps: $(ls "$lcx_gd_dir"/*.deb | wc -l) packages, $(du -sh "$lcx_gd_dir" | cut -f1) in $lcx_gd_dir"
    ;;
env)
    export LCX_DEPS=/opt/lcxdeps
    if [ ! -f "$LCX_DEPS/.unpacked" ]; then
        mkdir -p "$LCX_DEPS"
        for f in "$lcx_gd_dir"/*.deb; do dpkg -x "$f" "$LCX_DEPS"; done
        touch "$LCX_DEPS/.unpacked"
    fi
    lcx_gd_lib=$LCX_DEPS/usr/lib/x86_64-linux-gnu
    export PATH=$LCX_DEPS/usr/bin:$PATH
    export LD_LIBRARY_PATH=$lcx_gd_lib:$lcx_gd_lib/openblas-pthread:$lcx_gd_lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PKG_CONFIG_SYSROOT_DIR=$LCX_DEPS
    export PKG_CONFIG_LIBDIR=$lcx_gd_lib/pkgconfig:$LCX_DEPS/usr/share/pkgconfig:$lcx_gd_lib/openblas-pthread/pkgconfig
    export OPAL_PREFIX=$LCX_DEPS/usr
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Debian's alternatives links are not unpacked: name the real programs.
    for lcx_gd_l in mpicc:mpicc.openmpi mpirun:mpirun.openmpi mpiexec:mpiexec.openmpi pkg-config:pkgconf; do
        [ -e "$LCX_DEPS/usr/bin/${lcx_gd_l%%:*}" ] || ln -s "${lcx_gd_l#*:}" "$LCX_DEPS/usr/bin/${lcx_gd_l%%:*}"
    done
    export LCX_DEVICE_CMAKE_ARGS="-DPKG_CONFIG_EXECUTABLE=$LCX_DEPS/usr/bin/pkgconf -DMPI_C_COMPILER=$LCX_DEPS/usr/bin/mpicc.openmpi -DMPIEXEC_EXECUTABLE=$LCX_DEPS/usr/bin/mpirun.openmpi"
    ;;
*)
    echo "usage: bench/gpu_deps.sh fetch [DIR] | source bench/gpu_deps.sh env [DIR]" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
