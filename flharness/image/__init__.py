"""Kernel-under-test images: a recipe (images/NAME.yml) → a build (Debian packages, extra
modules compiled out of tree) → a cached guest root with a manifest → booted by `--vm NAME`.

recipe.py (schema), debian.py (mmdebstrap, apt and chroots), sources.py (extra modules'
sources), build.py (the stages), store.py (the cache, manifests, list and removal).
"""
