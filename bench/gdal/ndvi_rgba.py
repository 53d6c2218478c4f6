"""gdal2tiles' input for the pyramid row: a scene's NDVI, rescaled and colour-mapped, as an 8-bit RGBA raster.

gdal2tiles tiles the bands it is given (a grey, paletted or RGB(A) image); it has no band math, rescale or
colormap. So the GDAL route of bench/sections/pyramid.ts first renders the scene as Tessera renders a tile
(shared/raster/image-encoder.ts renderPixels) and only then cuts the pyramid: this script's time is counted in
gdal2tiles' total.

The fastest way found with GDAL's own pieces, on N processes (multiprocessing, fork): the scene is cut into
strips of whole source blocks; each worker reads both bands of its strips once, computes
(B08 - B04) / (B08 + B04) in float64 stored as float32, maps each value to a level as matplotlib's Normalize
does (floor((v - min) / (max - min) * 256), max itself 255, the ends clamped), looks the level up in the same
256-entry colormap Tessera uses, sets alpha 0 where a band is the source nodata or the sum is 0, and writes an
uncompressed tiled RGBA GeoTIFF strip (no codec: the cheapest to write and for gdal2tiles to read). A VRT over
the strips (gdal.BuildVRT) is the raster gdal2tiles opens. (gdal_calc.py with --color-table then
gdal_translate -expand rgba is the command-line route: one process, and a whole-scene intermediate.)

Input: one JSON argument {scene, outDir, processes, rescale: [min, max], colormapHex, noDataIn}; output: one
JSON line {vrt, strips, elapsedMs}.
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
    lut = np.frombuffer(bytes.fromhex(spec["colormapHex"]), dtype=np.uint8).reshape(256, 3)
    _state.update(
        spec=spec,
        red=src.GetRasterBand(1),
        nir=src.GetRasterBand(2),
        gt=src.GetGeoTransform(),
        srs=src.GetProjection(),
        width=src.RasterXSize,
        lut=lut,
        gtiff=gdal.GetDriverByName("GTiff"),
        src=src,
    )


def _strip(job):
    s = _state
    spec, gt, width = s["spec"], s["gt"], s["width"]
    index, y, height = job
    a = s["red"].ReadAsArray(0, y, width, height).astype(np.float64)
    b = s["nir"].ReadAsArray(0, y, width, height).astype(np.float64)
    nodata = spec["noDataIn"]
    lo, hi = spec["rescale"]
    with np.errstate(divide="ignore", invalid="ignore"):
        total = b + a
        v = ((b - a) / total).astype(np.float32).astype(np.float64)
        valid = (a != nodata) & (b != nodata) & (total != 0) & np.isfinite(v)
        t = (v - lo) / (hi - lo) * 256
    level = np.where(t >= 255, 255, np.where(t < 0, 0, np.floor(np.nan_to_num(t)))).astype(np.uint8)
    rgb = s["lut"][level]
    path = os.path.join(spec["outDir"], f"strip-{index:05d}.tif")
    ds = s["gtiff"].Create(path, width, height, 4, gdal.GDT_Byte, options=["TILED=YES", "BLOCKXSIZE=512", "BLOCKYSIZE=512"])
    ds.SetGeoTransform((gt[0] + y * gt[2], gt[1], gt[2], gt[3] + y * gt[5], gt[4], gt[5]))
    ds.SetProjection(s["srs"])
    for i in range(3):
        ds.GetRasterBand(i + 1).WriteArray(np.where(valid, rgb[:, :, i], 0).astype(np.uint8))
    ds.GetRasterBand(4).WriteArray(np.where(valid, 255, 0).astype(np.uint8))
    ds.GetRasterBand(4).SetColorInterpretation(gdal.GCI_AlphaBand)
    ds = None
    return path


def main(spec):
    started = time.perf_counter()
    info = gdal.Open(spec["scene"])
    height = info.RasterYSize
    rows = info.GetRasterBand(1).GetBlockSize()[1]
    info = None
    # Whole blocks of the source, at least one strip per process.
    step = max(rows, (height // (4 * spec["processes"]) // rows) * rows)
    jobs = [(i, y, min(step, height - y)) for i, y in enumerate(range(0, height, step))]
    os.makedirs(spec["outDir"], exist_ok=True)
    with mp.get_context("fork").Pool(spec["processes"], initializer=_open, initargs=(spec,)) as pool:
        strips = sorted(pool.imap_unordered(_strip, jobs))
    vrt = os.path.join(spec["outDir"], "ndvi-rgba.vrt")
    gdal.BuildVRT(vrt, strips)
    return {"vrt": vrt, "strips": len(strips), "elapsedMs": (time.perf_counter() - started) * 1000}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
