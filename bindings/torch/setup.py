"""Builds loom_torch: the torch.distributed backend over loom's C API.

    pip install ./bindings/torch        (from the loom repository root)

It needs torch installed already (bindings/torch/install_torch.sh), and finds loom in this
order:
  1. LOOM_PREFIX: an installed loom (include/loom/loom.h, lib/libloom.so);
  2. LOOM_BUILD_DIR: a CMake build of the loom tree that holds libloom.so;
  3. otherwise the loom source tree this file sits in (or LOOM_SOURCE_DIR), built here with
     CMake (the library only, CPU path), into bindings/torch/build/loom.
libloom.so is copied next to the extension, which finds it through an $ORIGIN rpath, so the
installed package does not depend on the build tree.
"""

import glob
import os
import shutil
import site
import subprocess
import sys
import sysconfig

from setuptools import setup


def import_torch_of_this_interpreter():
    """pip builds in an isolated environment that hides the interpreter's own site-packages,
    where torch is installed (a build requirement on torch would download all of it again).
    The extension must be built against that very torch: look for it there, after the
    isolated environment's own paths."""
    try:
        import torch  # noqa: F401
    except ImportError:
        for path in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"),
                     site.getusersitepackages()):
            if path and path not in sys.path and os.path.isdir(os.path.join(path, "torch")):
                sys.path.append(path)
        try:
            import torch  # noqa: F401
        except ImportError:
            sys.exit("loom_torch: torch is not installed for " + sys.executable +
                     "; install it first: bash bindings/torch/install_torch.sh")


import_torch_of_this_interpreter()
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
package_dir = os.path.join(here, "loom_torch")


def build_loom_from_source() -> tuple[str, str]:
    source = os.environ.get("LOOM_SOURCE_DIR", os.path.normpath(os.path.join(here, "..", "..")))
    if not os.path.exists(os.path.join(source, "include", "loom", "loom.h")):
        sys.exit(
            f"loom_torch: no loom found. {source} is not a loom source tree; set LOOM_PREFIX "
            "to an installed loom or LOOM_SOURCE_DIR to a loom checkout."
        )
    build = os.path.join(here, "build", "loom")
    jobs = os.environ.get("LOOM_BUILD_JOBS", "2")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.check_call(
        ["cmake", "-S", source, "-B", build, *generator, "-DCMAKE_BUILD_TYPE=Release",
         "-DLOOM_WITH_CUDA=OFF", "-DBUILD_TESTING=OFF"]
    )
    subprocess.check_call(["cmake", "--build", build, "--target", "loom", "--parallel", jobs])
    return os.path.join(source, "include"), build


def find_loom() -> tuple[str, str]:
    """(include dir, directory of libloom.so)."""
    prefix = os.environ.get("LOOM_PREFIX")
    if prefix:
        for lib in ("lib", "lib64", os.path.join("lib", "x86_64-linux-gnu")):
            if glob.glob(os.path.join(prefix, lib, "libloom.so*")):
                return os.path.join(prefix, "include"), os.path.join(prefix, lib)
        sys.exit(f"loom_torch: LOOM_PREFIX={prefix} has no lib/libloom.so")
    build = os.environ.get("LOOM_BUILD_DIR")
    if build:
        source = os.environ.get("LOOM_SOURCE_DIR", os.path.join(here, "..", ".."))
        return os.path.join(os.path.normpath(source), "include"), build
    return build_loom_from_source()


include_dir, lib_dir = find_loom()
# The package carries its libloom under the soname the extension asks for (libloom.so.0);
# the linker reads the unversioned name in lib_dir.
for old in glob.glob(os.path.join(package_dir, "libloom.so*")):
    os.remove(old)
sonames = sorted(glob.glob(os.path.join(lib_dir, "libloom.so.[0-9]")))
if not sonames:
    sys.exit(f"loom_torch: {lib_dir} has no libloom.so.<major>; build loom's 'loom' target")
shutil.copy2(sonames[-1], package_dir, follow_symlinks=True)

setup(
    name="loom_torch",
    version="0.1.0",
    description="loom collective communication as a torch.distributed backend",
    packages=["loom_torch"],
    package_data={"loom_torch": ["libloom.so.*"]},
    ext_modules=[
        CppExtension(
            "loom_torch._C",
            sources=sorted(glob.glob(os.path.join("csrc", "*.cc"))),
            include_dirs=[include_dir],
            library_dirs=[lib_dir],
            libraries=["loom"],
            extra_compile_args=["-std=c++20", "-O2"],
            extra_link_args=["-Wl,-rpath,$ORIGIN"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    entry_points={"torch.distributed.backends": ["loom = loom_torch:register"]},
    python_requires=">=3.9",
)
