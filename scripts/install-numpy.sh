#!/usr/bin/env bash
# install-numpy.sh installs Debian's python3-numpy, which the .npz export
# test (tensorbuf's TestExportNPZNumPy) reads archives with and the bench's
# NumPy peer uses. Running it again when numpy imports does nothing.
#
# Usage: scripts/install-numpy.sh   (as root, or with sudo available)
set -euo pipefail

if /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then
	echo "install-numpy: numpy $(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)') already installed"
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-numpy
