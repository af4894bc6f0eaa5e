"""`fl image list`: the built images, and the recipes not built yet."""
from __future__ import annotations

import time

from ..units import human_size
from .recipe import changed_since_built, recipe_names
from .store import age, cache_root, images

#: What `fl image list` names of a kernel's support, when it has it.
NOTABLE = {"qdiscs": ("dualpi2", "netem", "fq_codel", "cake", "fq", "pie", "fq_pie"),
           "ccs": ("prague", "dctcp", "bbr", "cubic")}


def print_images() -> int:
    built = images()
    for image in built:
        m = image.manifest
        notable = [n for what, names in NOTABLE.items() for n in names if n in m.supports.get(what, [])]
        extra = f"; built: {', '.join(x.name for x in m.modules)}" if m.modules else ""
        extra += f"; STALE: its recipe changed (./fl image build {image.name})" \
            if changed_since_built(image.name, m.recipe_sha256) else ""
        print(f"{image.name:<14} kernel {m.kernel.release:<24} {human_size(m.size_bytes):>8}  "
              f"{age(time.time() - m.built):>8} old  {' '.join(notable)}{extra}")
    waiting = [n for n in recipe_names() if n not in {i.name for i in built}]
    for name in waiting:
        print(f"{name:<14} not built (./fl image build {name})")
    if not built and not waiting:
        print("no images and no recipes (images/NAME.yml)")
    print(f"\ncache: {cache_root()}")
    return 0
