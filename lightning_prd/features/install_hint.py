"""The pip command that adds torchvision beside the installed torch without replacing it.

**Rule.** ``pip install torchvision`` (or the ``images`` extra) takes the newest torchvision, which
requires the newest torch: pip then replaces the installed torch, a CPU build with the default CUDA
build and its CUDA packages. Each torchvision release is built for one torch release: torch
``2.m.p`` pairs with torchvision ``0.(m + 15).p`` (torch 2.13.0 with torchvision 0.28.0, 2.14.1 with
0.29.1). The command pins that version, computed from ``torch.__version__``, and when the installed
torch is a build of PyTorch's own index (a local label such as ``+cpu`` or ``+cu126``) it adds that
index, where the matching build lives. A torch version outside that pattern (a nightly, a source
build) gets the advice in words. The command is text only: nothing is fetched.
"""

from __future__ import annotations

import re
from typing import Optional

import torch

#: torch 2.m.p and its local label (``+cpu``, ``+cu126``, ``+rocm6.4``), a plain release only.
_RELEASE = re.compile(r"2\.(\d+)\.(\d+)(?:\+([A-Za-z0-9.]+))?")
#: PyTorch's index, one folder per build (``/whl/cpu``, ``/whl/cu126``).
PYTORCH_INDEX = "https://download.pytorch.org/whl/"


def torchvision_install_command(torch_version: Optional[str] = None) -> str:
    """The pip command for the torchvision built for ``torch_version`` (default: the installed torch).

    Example:
        >>> torchvision_install_command("2.13.0+cpu")
        'pip install torchvision==0.28.0 --index-url https://download.pytorch.org/whl/cpu'
        >>> torchvision_install_command("2.14.1")
        'pip install torchvision==0.29.1'
    """
    version = str(torch.__version__ if torch_version is None else torch_version)
    found = _RELEASE.fullmatch(version)
    if found is None or int(found.group(1)) < 1:
        return f"pip install the torchvision release built for torch {version} (https://pytorch.org/get-started)"
    minor, patch, label = int(found.group(1)), int(found.group(2)), found.group(3)
    command = f"pip install torchvision==0.{minor + 15}.{patch}"
    return command if label is None else f"{command} --index-url {PYTORCH_INDEX}{label}"


def missing_torchvision(what: str, torch_version: Optional[str] = None) -> str:
    """The one-line message for ``what`` needing torchvision when it is not installed.

    Example:
        >>> missing_torchvision("The InceptionV3 extractor", "2.13.0+cpu")[:62]
        'The InceptionV3 extractor needs torchvision, which is not inst'
    """
    version = str(torch.__version__ if torch_version is None else torch_version)
    return (
        f"{what} needs torchvision, which is not installed: {torchvision_install_command(version)} "
        f"(the torchvision built for the installed torch {version}; a plain `pip install torchvision` "
        "would replace that torch with the newest one)"
    )
