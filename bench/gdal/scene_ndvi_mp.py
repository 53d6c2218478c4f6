"""GDAL as a library on every core: a whole scene to NDVI COG tiles with a process pool.

The fastest GDAL route found for section 3 that makes the same tiles as Tessera
(bench/sections/scaling.ts says why the command-line routes do not): N worker
processes (multiprocessing, fork), each opening the scene once, then for each
window of its share exactly what bench/gdal/warm_ndvi.py does: read the window
of bands 1 (B04) and 2 (B08), NDVI in float64 with the source nodata mapped to
the output nodata, write a float32 COG (same block size, codec, predictor,
level, averaged overviews) named <row>_<col>.tif. Input: one JSON argument;
output: one JSON line.
"""
import json
import multiprocessing as mp
import os
import sys
import time

import numpy as np
from osgeo import gdal

gdal.UseExceptions()

_state = {}


def _open(spec):
    src = gdal.Open(spec["scene"])
    _state.update(
        spec=spec,
        src=src,
        red=src.GetRasterBand(1),
        nir=src.GetRasterBand(2),
        gt=src.GetGeoTransform(),
        srs=src.GetProjection(),
        mem=gdal.GetDriverByName("MEM"),
        cog=gdal.GetDriverByName("COG"),
        options=[
            f"BLOCKSIZE={spec['blockSize']}",
            f"COMPRESS={spec['compression']}",
            "PREDICTOR=YES",
            f"LEVEL={spec['level']}",
            "RESAMPLING=AVERAGE",
        ],
    )


def _tile(w):
    s = _state
    spec, gt = s["spec"], s["gt"]
    row, col, x, y, width, height = w
    a = s["red"].ReadAsArray(x, y, width, height).astype(np.float64)
    b = s["nir"].ReadAsArray(x, y, width, height).astype(np.float64)
    nodata_in, nodata_out = spec["noDataIn"], spec["noDataOut"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ndvi = np.where((a == nodata_in) | (b == nodata_in), nodata_out, (b - a) / (b + a)).astype(np.float32)
    ds = s["mem"].Create("", width, height, 1, gdal.GDT_Float32)
    ds.SetGeoTransform((gt[0] + x * gt[1] + y * gt[2], gt[1], gt[2], gt[3] + x * gt[4] + y * gt[5], gt[4], gt[5]))
    ds.SetProjection(s["srs"])
    band = ds.GetRasterBand(1)
    band.SetNoDataValue(nodata_out)
    band.WriteArray(ndvi)
    s["cog"].CreateCopy(os.path.join(spec["outDir"], f"{row}_{col}.tif"), ds, options=s["options"])
    return 1


def main(spec):
    started = time.perf_counter()
    info = gdal.Open(spec["scene"])
    width, height = info.RasterXSize, info.RasterYSize
    info = None
    px = spec["tilePx"]
    windows = [
        (r, c, c * px, r * px, min(px, width - c * px), min(px, height - r * px))
        for r in range((height + px - 1) // px)
        for c in range((width + px - 1) // px)
    ]
    os.makedirs(spec["outDir"], exist_ok=True)
    with mp.get_context("fork").Pool(spec["processes"], initializer=_open, initargs=(spec,)) as pool:
        tiles = sum(pool.imap_unordered(_tile, windows, chunksize=2))
    return {"elapsedMs": (time.perf_counter() - started) * 1000, "tiles": tiles, "processes": spec["processes"]}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
