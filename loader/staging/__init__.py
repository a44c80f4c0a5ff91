"""Staging: the CSV change files, their manifests, and the stores that hold them."""
