"""Prints what the PyTorch references depend on besides attn's scripts, one line each: Python's
version, then for torch, torchvision, numpy and PIL the distribution's version and the size and
modification time of the package's __init__.py (a distribution rebuilt under the same version number,
e.g. a new Debian revision, changes it).

tests/support/torch_ref.cpp runs it once per test process and hashes its output into the key of the
reference cache, so references computed by another torch (or numpy, ...) are not reused. It imports
none of the packages (that would cost seconds per test binary): metadata and file times only.
"""
import importlib.metadata
import importlib.util
import os
import sys

# (import name, distribution name)
PACKAGES = [("torch", "torch"), ("torchvision", "torchvision"), ("numpy", "numpy"), ("PIL", "Pillow")]


def main():
    print("python", sys.version.split()[0])
    for module, dist in PACKAGES:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            print(module, "missing")
            continue
        st = os.stat(spec.origin)
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        print(module, version, spec.origin, st.st_size, int(st.st_mtime))


if __name__ == "__main__":
    main()
