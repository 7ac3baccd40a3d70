#!/usr/bin/env bash
# install-python.sh installs what `make test-python` needs from Debian:
# python3-numpy, python3-torch and python3-pytest for /usr/bin/python3 (no
# PyPI), and libopenblas0-pthread so that torch's matrix products are not
# the reference BLAS's. Running it again when they import does nothing.
#
# Usage: scripts/install-python.sh   (as root, or with sudo available)
set -euo pipefail

if /usr/bin/python3 -c 'import numpy, torch, pytest' >/dev/null 2>&1; then
	echo "install-python: numpy, torch and pytest already installed"
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-numpy python3-torch python3-pytest libopenblas0-pthread
