"""The agent's settings as the official vSphere CPI hands them over: a file `env` at the
root of an ISO 9660 image on the VM's CD-ROM, which the bosh-agent's CDROM settings source
mounts and reads at boot.

pycdlib writes the image in memory (a few KiB); the name is given in ISO 9660 (`ENV.;1`,
what Linux shows as `env` by default), Rock Ridge and Joliet, so every mount option the
agent may use finds `env`.
"""

from __future__ import annotations

import io


def env_iso(env: bytes) -> bytes:
    """An ISO 9660 image holding `env` as the file `env`."""
    import pycdlib

    image = pycdlib.PyCdlib()
    image.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident="CDROM")
    image.add_fp(io.BytesIO(env), len(env), "/ENV.;1", rr_name="env", joliet_path="/env")
    out = io.BytesIO()
    image.write_fp(out)
    image.close()
    return out.getvalue()


def read_env(image: bytes) -> bytes:
    """The `env` file of an image env_iso made (for `cpi show` and the tests)."""
    import pycdlib

    reader = pycdlib.PyCdlib()
    reader.open_fp(io.BytesIO(image))
    out = io.BytesIO()
    reader.get_file_from_iso_fp(out, iso_path="/ENV.;1")
    reader.close()
    return out.getvalue()
