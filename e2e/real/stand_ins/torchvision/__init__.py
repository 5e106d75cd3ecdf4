# Why this exists: SGLang 0.5.23 imports torchvision unconditionally while loading its config and multimodal
# processor modules (configs/deepseek_ocr.py: `from torchvision.transforms import InterpolationMode, functional`),
# even to serve a text model, and the registry's torchvision is CUDA-linked: against CPU torch its import fails
# (`operator torchvision::nms does not exist`). e2e.real.sglang.install() uninstalls it and copies this package instead.
# What it implements: nothing that runs. The modules SGLang imports (torchvision.transforms, .transforms.functional,
# .transforms.v2, .transforms.v2.functional, .io) exist, registered in sys.modules from this one file;
# transforms.InterpolationMode is a real enum with torchvision's members (module-level defaults use them); every other
# name imports but raises NotImplementedError naming itself when called. There is no dist-info folder, so
# transformers counts torchvision as absent and never uses it.
"""An import-only stand-in for torchvision, for serving a text model with SGLang 0.5.23 on a CPU."""

import sys
import types
from enum import Enum

__version__ = "0.0.0+fastgen-stand-in"
SUBMODULES = ("transforms", "transforms.functional", "transforms.v2", "transforms.v2.functional", "io")


class InterpolationMode(Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def _unavailable(qualified: str):
    def call(*args, **kwargs):
        raise NotImplementedError(
            f"{qualified} is not implemented by fastgen's import-only torchvision stand-in "
            f"(e2e/real/stand_ins/torchvision): a text model should not need it"
        )

    call.__name__ = call.__qualname__ = qualified.rsplit(".", 1)[-1]
    return call


def _stand_in_getattr(module: str):
    def __getattr__(name: str):
        if name.startswith("__"):  # __all__, __path__ lookups and the like
            raise AttributeError(name)
        return _unavailable(f"{module}.{name}")

    return __getattr__


__getattr__ = _stand_in_getattr(__name__)
for _dotted in SUBMODULES:
    _module = types.ModuleType(f"{__name__}.{_dotted}", f"{__name__}.{_dotted}, import-only (fastgen stand-in)")
    _module.__path__ = []  # a package, so that its own submodules import
    _module.__dict__["__getattr__"] = _stand_in_getattr(_module.__name__)  # the module's __getattr__ (PEP 562)
    sys.modules[_module.__name__] = _module
    _parent, _, _leaf = _module.__name__.rpartition(".")
    setattr(sys.modules[_parent], _leaf, _module)
sys.modules[f"{__name__}.transforms"].__dict__["InterpolationMode"] = InterpolationMode
sys.modules[f"{__name__}.transforms.functional"].__dict__["InterpolationMode"] = InterpolationMode
