#!/usr/bin/env python3
"""Writes a one-layer OCI image archive (an image layout in a tar) from files on disk, for
images too small to need an image builder: the real node's pause image (node.sh).

usage: oci-archive.py OUT.tar NAME USER ENTRYPOINT SOURCE:PATH...

NAME is the image's full name (registry.k8s.io/pause:3.10.2), which `ctr images import` reads
from the io.containerd.image.name annotation; each SOURCE file is put at PATH in the layer,
owned by root, mode 0755. Timestamps are zero, so the same files give the same digest.
"""
import gzip
import hashlib
import io
import json
import sys
import tarfile


def blob(tar, data, media_type):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def layer(files):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for source, path in files:
            data = open(source, "rb").read()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o755
            t.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def main(out, name, user, entrypoint, *files):
    pairs = [f.split(":", 1) for f in files]
    diff = layer(pairs)
    compressed = gzip.compress(diff, mtime=0)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"User": user, "Entrypoint": [entrypoint]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(diff).hexdigest()}"]},
    }
    with tarfile.open(out, "w") as tar:
        layer_desc = blob(tar, compressed, "application/vnd.oci.image.layer.v1.tar+gzip")
        config_desc = blob(tar, json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json")
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": config_desc, "layers": [layer_desc]}
        manifest_desc = blob(tar, json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")
        manifest_desc["annotations"] = {"io.containerd.image.name": name,
                                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}
        for path, data in (("oci-layout", {"imageLayoutVersion": "1.0.0"}),
                           ("index.json", {"schemaVersion": 2, "manifests": [manifest_desc]})):
            encoded = json.dumps(data).encode()
            info = tarfile.TarInfo(path)
            info.size = len(encoded)
            tar.addfile(info, io.BytesIO(encoded))


if __name__ == "__main__":
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
