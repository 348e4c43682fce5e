"""Builds the dlcp package from the repository.

The C library must be built first (make build): its shared object,
libdlcp.so, is copied into the package, and the torch.distributed backend
(csrc/, when torch and its headers are present) is linked against it with
an rpath to the package directory.  DLCP_BUILD_DIR names the CMake build
directory (default: ../build).  DLCP_TORCH_BACKEND=0 skips the backend.
"""

import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.abspath(os.environ.get("DLCP_BUILD_DIR",
                                       os.path.join(REPO, "build")))
LIBDIR = os.path.join(BUILD, "lib")
LIBRARY = os.path.join(LIBDIR, "libdlcp.so")

if not os.path.exists(LIBRARY):
    sys.exit(f"dlcp setup: {LIBRARY} does not exist; build the C library "
             "first (make build) or set DLCP_BUILD_DIR")


class BuildPyWithLibrary(build_py):
    """Puts libdlcp.so next to the package's modules."""

    def run(self):
        super().run()
        shutil.copy2(LIBRARY, os.path.join(self.build_lib, "dlcp"))


def torch_extension():
    if os.environ.get("DLCP_TORCH_BACKEND", "1") == "0":
        return [], {}
    try:
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        print("dlcp setup: torch not importable; building without the "
              "torch.distributed backend", file=sys.stderr)
        return [], {}
    ext = CppExtension(
        "dlcp.torch._backend", ["csrc/process_group_dlcp.cpp"],
        include_dirs=[os.path.join(REPO, "include")],
        library_dirs=[LIBDIR], libraries=["dlcp"],
        extra_compile_args=["-O2", "-Wall"],
        extra_link_args=["-Wl,-rpath,$ORIGIN/.."])
    return [ext], {"build_ext": BuildExtension.with_options(
        use_ninja=False)}


ext_modules, cmdclass = torch_extension()
cmdclass["build_py"] = BuildPyWithLibrary
setup(ext_modules=ext_modules, cmdclass=cmdclass)
