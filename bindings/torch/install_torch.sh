#!/usr/bin/env bash
# Installs the CPU-usable part of PyTorch (about 2.1 GB instead of about 5 GB).
#
# PyPI has no CPU-only torch wheel for Linux x86_64, and a plain `pip install torch` also pulls
# every CUDA library. Where the CUDA toolkit in /usr/local/cuda supplies the rest, torch imports
# and runs on the CPU with only:
#   1. the torch wheel itself, without dependencies;
#   2. its pure-Python dependencies;
#   3. the four nvidia wheels that libtorch links at load time (nccl, nvshmem, cusparselt,
#      cufile), at exactly the versions torch's metadata pins. A different nccl fails the import
#      (on ncclCommResume, for example).
# Where `import torch` still fails, it falls back to the full install.
#
# Usage: bash bindings/torch/install_torch.sh   (TORCH_VERSION overrides the version, 2.15.0)
set -euo pipefail

version=${TORCH_VERSION:-2.15.0}
python=${PYTHON:-python3}
pip=("$python" -m pip)

if "$python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" \
  2>/dev/null; then
  echo "torch $version is installed already"
  exit 0
fi

"${pip[@]}" install --no-deps "torch==$version"
"${pip[@]}" install filelock 'typing_extensions>=4.13.0' 'sympy>=1.13.3' 'networkx>=2.5.1' \
  jinja2 'fsspec>=0.8.5' numpy 'setuptools>=77.0.3' pytest

# The exact pins, read from the installed torch's metadata. nvidia-cufile is pinned one level
# down, by the cuda-toolkit package that torch pins; only that package's metadata is fetched.
pins=$("$python" - <<'EOF'
import importlib.metadata as md
import re

wanted = ("nvidia-nccl-cu13", "nvidia-nvshmem-cu13", "nvidia-cusparselt-cu13")
for req in md.requires("torch") or []:
    spec = req.split(";")[0].replace(" ", "")
    name = re.split(r"[<>=~!\[]", spec, maxsplit=1)[0]
    if name in wanted or name == "cuda-toolkit":
        print(re.sub(r"\[.*\]", "", spec))
EOF
)
toolkit=$(grep '^cuda-toolkit' <<<"$pins" || true)
nvidia=$(grep -v '^cuda-toolkit' <<<"$pins" || true)
if [[ -n $toolkit ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "${pip[@]}" download --quiet --no-deps "$toolkit" -d "$tmp"
  cufile=$("$python" - "$tmp" <<'EOF'
import glob, re, sys, zipfile

wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith("METADATA"))
    for line in z.read(meta).decode().splitlines():
        m = re.match(r"Requires-Dist: (nvidia-cufile[^;]*)", line)
        if m:
            print(m.group(1).replace(" ", ""))
            break
EOF
)
  nvidia="$nvidia"$'\n'"$cufile"
fi
echo "nvidia wheels matching torch $version:" $nvidia
# shellcheck disable=SC2086  # one requirement per word
"${pip[@]}" install --no-deps $nvidia

if ! "$python" -c "import torch" 2>/dev/null; then
  echo "import torch fails with the small set; installing torch $version with all dependencies"
  "${pip[@]}" install "torch==$version"
fi
"$python" -c "import torch; print('torch', torch.__version__, 'imports')"
