"""Writes HDF5 dumps that point outside themselves, for tests/cli/read_only_named.sh.

Usage: python make_outside_fixtures.py DIR
DIR/dump/   the dumps the user names (each also holds a good float32 tensor 'good')
DIR/other/  files outside the dump's folder that must never be opened
Written with h5py (libver 'earliest', so libhdf5 1.10 reads them), independently of fp8kit.
"""
import os
import sys

import h5py
import numpy as np

root = sys.argv[1]
dump = os.path.join(root, "dump")
other = os.path.join(root, "other")
os.makedirs(dump, exist_ok=True)
os.makedirs(other, exist_ok=True)

secret = os.path.join(other, "secret.bin")
np.arange(16, dtype="<f4").tofile(secret)
with h5py.File(os.path.join(other, "src.h5"), "w") as f:
    f["data"] = np.arange(16, dtype="<f4")
# Inside the dump's folder: what --allow-external-in-dump-folder may read.
np.full(16, 2.0, dtype="<f4").tofile(os.path.join(dump, "inside.bin"))
with h5py.File(os.path.join(dump, "inside_src.h5"), "w") as f:
    f["data"] = np.full(16, 3.0, dtype="<f4")


def new(name):
    f = h5py.File(os.path.join(dump, name), "w")
    f["good"] = np.linspace(-1, 1, 64, dtype="<f4")
    f["codes16"] = np.full(16, 0x40, dtype="u1")  # 2.0 in E4M3: validate's --output
    return f


def vds(f, name, path, dset):
    layout = h5py.VirtualLayout(shape=(16,), dtype="<f4")
    layout[:] = h5py.VirtualSource(path, dset, shape=(16,))
    f.create_virtual_dataset(name, layout)


with new("ext_passwd.h5") as f:
    f.create_dataset("x", shape=(16,), dtype="<f4", external=[("/etc/passwd", 0, 64)])
    f.create_dataset("codes", shape=(64,), dtype="u1", external=[("/etc/passwd", 0, 64)])
with new("ext_other.h5") as f:
    f.create_dataset("abs", shape=(16,), dtype="<f4", external=[(secret, 0, 64)])
    f.create_dataset("rel", shape=(16,), dtype="<f4", external=[("../other/secret.bin", 0, 64)])
    f.create_dataset("cwd", shape=(16,), dtype="<f4", external=[("secret.bin", 0, 64)])
with new("ext_zero.h5") as f:
    f.create_dataset("zero", shape=(1 << 20,), dtype="<f4", external=[("/dev/zero", 0, 4 << 20)])
    f.create_dataset("urandom", shape=(1 << 20,), dtype="<f4", external=[("/dev/urandom", 0, 4 << 20)])
with new("vds.h5") as f:
    vds(f, "v", os.path.join(other, "src.h5"), "data")
    vds(f, "missing", os.path.join(other, "no_such.h5"), "data")
with new("vds_self.h5") as f:
    vds(f, "self", ".", "self")
with new("elink.h5") as f:
    f["e"] = h5py.ExternalLink(os.path.join(other, "src.h5"), "data")
    f["erel"] = h5py.ExternalLink("src.h5", "data")  # libhdf5 also searches the working directory
with new("inside.h5") as f:
    f.create_dataset("ext", shape=(16,), dtype="<f4", external=[("inside.bin", 0, 64)])
    vds(f, "v", "inside_src.h5", "data")

# For `simulate msamp`: modules of wgrad/weight/exp_avg/exp_avg_sq, one of each module's four
# stored outside the file in one of the ways above; module "good" is whole.
with h5py.File(os.path.join(dump, "msamp.h5"), "w") as f:
    rng = np.random.default_rng(25)
    for mod in ("good", "ext", "zero", "vds", "self", "link"):
        for name in ("wgrad", "weight", "exp_avg", "exp_avg_sq"):
            f[f"{mod}/{name}"] = (rng.standard_normal(16) ** (2 if name == "exp_avg_sq" else 1)).astype("<f4")
    for mod, name in (("ext", "wgrad"), ("zero", "weight"), ("vds", "exp_avg"), ("self", "wgrad"), ("link", "exp_avg_sq")):
        del f[f"{mod}/{name}"]
    f.create_dataset("ext/wgrad", shape=(16,), dtype="<f4", external=[("/etc/passwd", 0, 64)])
    f.create_dataset("zero/weight", shape=(16,), dtype="<f4", external=[("/dev/zero", 0, 64)])
    vds(f, "vds/exp_avg", os.path.join(other, "src.h5"), "data")
    vds(f, "self/wgrad", ".", "self/wgrad")
    f["link/exp_avg_sq"] = h5py.ExternalLink(os.path.join(other, "src.h5"), "data")
