#!/usr/bin/env bash
# Installs what Tessel's build needs beyond the CUDA toolkit — only what is missing, so a second
# run does nothing. For Debian 12 / Ubuntu; run as root (as CI does) or with sudo available.
# Also fetches the cuDNN frontend's headers (optional; see the end).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

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

# The cuDNN frontend (header-only) for `tessel bench attention`'s cuDNN baseline, from PyPI's
# nvidia-cudnn-frontend wheel: only its include/ folder is kept, in build/_deps/cudnn-frontend
# (or $TESSEL_CUDNN_FRONTEND_DIR), where CMake looks. Any wheel of the release carries the same
# headers, so one platform's is asked for whatever the local Python is. Optional: when it cannot
# be fetched, the build leaves the baseline out and the bench says why.
fe_version=1.32.0
fe_dir=${TESSEL_CUDNN_FRONTEND_DIR:-$root/build/_deps/cudnn-frontend}
if [[ "$(cat "$fe_dir/VERSION" 2>/dev/null)" != "$fe_version" || ! -f "$fe_dir/include/cudnn_frontend.h" ]]; then
  fe_tmp=$(mktemp -d)
  if command -v python3 >/dev/null &&
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
      -d "$fe_tmp" "nvidia-cudnn-frontend==$fe_version" >"$fe_tmp/pip.log" 2>&1 &&
    python3 - "$fe_tmp" "$fe_dir" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
shutil.rmtree(dest, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("include/")])
PY
  then
    echo "$fe_version" >"$fe_dir/VERSION"
    echo "setup: cuDNN frontend $fe_version headers in $fe_dir"
  else
    echo "setup: could not fetch the cuDNN frontend headers (nvidia-cudnn-frontend==$fe_version from PyPI);" \
      "tessel is built without the cuDNN attention baseline" >&2
    tail -n 3 "$fe_tmp/pip.log" >&2 2>/dev/null || true
  fi
  rm -rf "$fe_tmp"
fi
