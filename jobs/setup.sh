#!/bin/sh
# setup.sh - everything a fresh Debian 12 (or Ubuntu) machine needs before
# the first run: the packages, the default corpus, configure and build.
# Run from anywhere; uses sudo when not root. Safe to run again.
set -eu
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
PACKAGES="build-essential autoconf automake pkg-config openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools libdnnl-dev libopenblas-dev libinih-dev libjansson-dev libpcre2-dev
  fortunes fortunes-min gnuplot-nox"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
if ! $SUDO apt-get install -y --no-install-recommends $PACKAGES >/dev/null; then
    $SUDO apt-get update >/dev/null
    $SUDO apt-get install -y --no-install-recommends $PACKAGES >/dev/null
fi
jobs/get-data.sh
[ -x configure ] || autoreconf -fi
# CONFIGURE_FLAGS: extra configure options, word-split on purpose
# shellcheck disable=SC2086
[ -f Makefile ] || ./configure ${CONFIGURE_FLAGS:-}
make -j"$(nproc)"
echo "setup.sh: built ./trident"
