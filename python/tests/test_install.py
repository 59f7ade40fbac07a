"""Installed with `cmake --install`, the package imports in a fresh process that has no build-tree
environment: no PYTHONPATH, no LD_LIBRARY_PATH, nothing but the installed files."""

import os
import subprocess
import sys


def test_installed_package_imports_in_a_clean_process(tmp_path):
    binary_dir = os.environ["SP_BINARY_DIR"]
    prefix = tmp_path / "usr"
    done = subprocess.run(["cmake", "--install", binary_dir, "--component", "python", "--prefix", str(prefix)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    sites = list(prefix.glob("lib/python3*/dist-packages"))
    assert len(sites) == 1, list(prefix.rglob("*"))
    site = sites[0]
    assert (site / "selective_precision" / "__init__.py").is_file()
    code = ("import sys; sys.path.insert(0, %r); import selective_precision as sp, torch; "
            "print(sp.__file__); print(sp.__version__); "
            "a = sp.Agent(network=False); a.register_blocks([torch.nn.Linear(4, 4)]); "
            "l = a._modules[0].weight.sum() ** 2; l.backward(); a.step(l); a.close(); print(a.precisions)") % str(site)
    clean = subprocess.run([sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stderr
    lines = clean.stdout.splitlines()
    assert lines[0].startswith(str(site)), lines
    assert lines[2] == "{'blocks.0': 'bf16'}"
