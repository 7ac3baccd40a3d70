#!/usr/bin/env bash
# install-cuda.sh installs Debian's CUDA toolkit (nvidia-cuda-toolkit, 11.8 on
# bookworm): nvcc, cuda.h and the stub libcuda.so that cuda builds link
# against. It enables the contrib and non-free components (deb822 .sources
# files and one-line sources.list alike), runs apt-get update and installs
# without questions. Running it again when nvcc is present does nothing.
#
# Usage: scripts/install-cuda.sh   (as root, or with sudo available)
set -euo pipefail

if command -v nvcc >/dev/null 2>&1 && [ -e /usr/include/cuda.h ]; then
	echo "install-cuda: $(nvcc --version | tail -n 1) already installed"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

# want lists the components every Debian source must carry.
want="main contrib non-free non-free-firmware"

# add_components_deb822 rewrites the Components: lines of one deb822 file so
# that each names every component in $want (keeping any it already had).
add_components_deb822() {
	local f=$1 tmp
	tmp=$(mktemp)
	awk -v want="$want" '
		/^Components:/ {
			n = split(want, w, " ")
			line = $0
			for (i = 1; i <= n; i++) {
				if (index(" " substr(line, 12) " ", " " w[i] " ") == 0) line = line " " w[i]
			}
			print line
			next
		}
		{ print }
	' "$f" >"$tmp"
	if ! cmp -s "$f" "$tmp"; then
		$SUDO cp "$tmp" "$f"
		echo "install-cuda: enabled contrib non-free in $f"
	fi
	rm -f "$tmp"
}

# add_components_list does the same for one-line "deb URI suite comps" files.
add_components_list() {
	local f=$1 tmp
	tmp=$(mktemp)
	awk -v want="$want" '
		/^[[:space:]]*deb(-src)?[[:space:]]/ && $0 ~ /debian/ {
			n = split(want, w, " ")
			line = $0
			for (i = 1; i <= n; i++) {
				if (index(" " line " ", " " w[i] " ") == 0) line = line " " w[i]
			}
			print line
			next
		}
		{ print }
	' "$f" >"$tmp"
	if ! cmp -s "$f" "$tmp"; then
		$SUDO cp "$tmp" "$f"
		echo "install-cuda: enabled contrib non-free in $f"
	fi
	rm -f "$tmp"
}

found=0
for f in /etc/apt/sources.list.d/*.sources; do
	[ -e "$f" ] || continue
	grep -q 'debian' "$f" || continue
	add_components_deb822 "$f"
	found=1
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -e "$f" ] || continue
	grep -Eq '^[[:space:]]*deb[[:space:]].*debian' "$f" || continue
	add_components_list "$f"
	found=1
done
if [ "$found" -eq 0 ]; then
	echo "install-cuda: no Debian apt source found to extend" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# nvidia-cuda-toolkit asks no questions, but some dependencies ship debconf
# prompts (licences): accept them up front.
echo "nvidia-cuda-toolkit nvidia-cuda-toolkit/license note" | $SUDO debconf-set-selections 2>/dev/null || true
$SUDO apt-get install -y -q --no-install-recommends nvidia-cuda-toolkit gcc libc6-dev
echo "install-cuda: $(nvcc --version | tail -n 1)"
