#!/usr/bin/env bash
# Installs what Tessel's build needs beyond the CUDA toolkit — only what is missing, so a second
# run does nothing. For Debian 12 / Ubuntu; run as root (as CI does) or with sudo available.
set -euo pipefail

packages=(cmake g++ libgtest-dev libcli11-dev nlohmann-json3-dev libdlpack-dev)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if ! command -v apt-get >/dev/null; then
    echo "setup: missing ${missing[*]} and no apt-get to install them; install them by hand" >&2
    exit 1
  fi
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then sudo=(sudo); else
      echo "setup: missing ${missing[*]}; run as root (or install sudo) to install them" >&2
      exit 1
    fi
  fi
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit is not ours to install; say clearly when CMake will not find it.
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]] && [[ -z "${CUDAToolkit_ROOT:-}" ]]; then
  echo "setup: no CUDA toolkit found (nvcc not on PATH, no /usr/local/cuda); install the CUDA 13 toolkit" >&2
  exit 1
fi

gxx_major=$(g++ -dumpversion | cut -d. -f1)
if ((gxx_major < 12)); then
  echo "setup: g++ $(g++ -dumpversion) is too old; Tessel needs g++ 12 or newer (C++20)" >&2
  exit 1
fi
