"""What a PNG file says about itself, read from its header (no image library needed)."""

from __future__ import annotations

import struct
from pathlib import Path


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels; fails unless the file starts with PNG's signature."""
    data = Path(path).read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def png_pixels(path: Path):
    """The image's pixels as rows of RGBA floats in 0-1 (matplotlib's reader), row 0 at the top."""
    from matplotlib import image

    return image.imread(Path(path))
