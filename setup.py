"""Builds selective_precision._core with this repository's CMake build (the `python` component), for
`pip install --no-build-isolation .`. Everything else is in pyproject.toml and python/."""

import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = ROOT / "build" / "pip"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=Release", "-DSP_BUILD_UI=OFF", "-DSP_BUILD_TESTS=OFF",
                     "-DSP_BUILD_PYTHON=ON", "-DPython_EXECUTABLE=" + sys.executable]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "sp_python_core"], check=True)
        built = next((build_dir / "python" / "selective_precision").glob("_core*.so"))
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)


setup(ext_modules=[Extension("selective_precision._core", sources=[])], cmdclass={"build_ext": CMakeBuild})
