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

# nvdisasm, for `tessel dump --sass` and its test (the CUDA 13 toolkit here ships ptxas but not
# nvdisasm): PyPI's nvidia-cuda-nvdisasm wheel, only the executable kept, in build/_deps/nvdisasm
# (or $TESSEL_NVDISASM_DIR), where CMake looks for the test. Optional: without it the test says
# SKIPPED and --sass asks for the tool.
da_version=13.5.37
da_dir=${TESSEL_NVDISASM_DIR:-$root/build/_deps/nvdisasm}
if [[ "$(cat "$da_dir/VERSION" 2>/dev/null)" != "$da_version" || ! -x "$da_dir/nvdisasm" ]]; then
  da_tmp=$(mktemp -d)
  if command -v python3 >/dev/null &&
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform manylinux2014_x86_64 -d "$da_tmp" "nvidia-cuda-nvdisasm==$da_version" >"$da_tmp/pip.log" 2>&1 &&
    python3 - "$da_tmp" "$da_dir" <<'PY'
import glob, os, stat, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/bin/nvdisasm"))
    with z.open(name) as src, open(os.path.join(dest, "nvdisasm"), "wb") as out:
        out.write(src.read())
path = os.path.join(dest, "nvdisasm")
os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY
  then
    echo "$da_version" >"$da_dir/VERSION"
    echo "setup: nvdisasm $da_version in $da_dir"
  else
    echo "setup: could not fetch nvdisasm (nvidia-cuda-nvdisasm==$da_version from PyPI); the --sass test is skipped" >&2
    tail -n 3 "$da_tmp/pip.log" >&2 2>/dev/null || true
  fi
  rm -rf "$da_tmp"
fi
