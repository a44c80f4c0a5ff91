"""Staging: the CSV change files, their manifests, and the stores that hold them (local, S3 with
the keys and endpoint of ``aws``, HDFS)."""
