#!/usr/bin/env bash
# Installs what fp8kit builds and tests with: Debian 12 packages, and a Python virtual environment
# (.venv) with the PyPI packages the golden checks, notebooks and Python module use.
# Idempotent; run as root on Debian 12. The CUDA toolkit is used when nvcc is already installed.
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(cmake g++ make pkg-config git ca-certificates
          libomp-dev catch2 libfmt-dev libhdf5-dev hdf5-tools libcli11-dev
          nlohmann-json3-dev libbenchmark-dev pybind11-dev zlib1g-dev
          python3 python3-dev python3-venv python3-pip clang libclang-rt-14-dev
          strace ccache clang-format-14
          libopenmpi-dev openmpi-bin)  # MPI: optional for the build (issue 19), used by tests/mpi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  /usr/bin/python3 -m venv .venv
fi
if ! .venv/bin/python -c "import numpy, h5py, ml_dtypes, pandas, matplotlib, nbclient, pytest, xdist, ipykernel, scikit_build_core, pybind11, jsonschema" 2>/dev/null ||
   [ ! -x .venv/bin/ruff ]; then
  echo "== installing Python packages into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
fi
