"""accelerated_scan.warp's scan, by ascan's kernels (see ascan.accelerated_scan)."""

from . import scan

__all__ = ["scan"]
