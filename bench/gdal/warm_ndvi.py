"""GDAL as a library, warm: the NDVI tiles of bench/sections/throughput.ts in one process.

The same work as Tessera's tile worker and the command-line baseline: read the
window of bands 1 (B04) and 2 (B08), NDVI in float64 with the source nodata
mapped to the output nodata, write a float32 COG (same block size, same codec
and level: DEFLATE or ZSTD, floating-point predictor, averaged overviews). One process
for every tile, so no interpreter or library start-up per tile: the warmest
GDAL there is. Input: one JSON argument; output: one JSON line.
"""
import json
import os
import sys
import time

import numpy as np
from osgeo import gdal

gdal.UseExceptions()


def main(spec):
    started = time.perf_counter()
    cpu_started = time.process_time()  # CPU time of the process: the work, whatever else the core ran
    src = gdal.Open(spec["scene"])
    red, nir = src.GetRasterBand(1), src.GetRasterBand(2)
    gt = src.GetGeoTransform()
    srs = src.GetProjection()
    nodata_in, nodata_out = spec["noDataIn"], spec["noDataOut"]
    options = [
        f"BLOCKSIZE={spec['blockSize']}",
        f"COMPRESS={spec.get('compression', 'DEFLATE')}",
        "PREDICTOR=YES",
        f"LEVEL={spec['level']}",  # the COG driver's LEVEL is ZLEVEL for DEFLATE and ZSTD_LEVEL for ZSTD
        "RESAMPLING=AVERAGE",
    ]
    mem, cog = gdal.GetDriverByName("MEM"), gdal.GetDriverByName("COG")
    for w in spec["windows"]:
        x, y, width, height = w["x"], w["y"], w["width"], w["height"]
        a = red.ReadAsArray(x, y, width, height).astype(np.float64)
        b = nir.ReadAsArray(x, y, width, height).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ndvi = np.where((a == nodata_in) | (b == nodata_in), nodata_out, (b - a) / (b + a)).astype(np.float32)
        ds = mem.Create("", width, height, 1, gdal.GDT_Float32)
        ds.SetGeoTransform((gt[0] + x * gt[1] + y * gt[2], gt[1], gt[2], gt[3] + x * gt[4] + y * gt[5], gt[4], gt[5]))
        ds.SetProjection(srs)
        band = ds.GetRasterBand(1)
        band.SetNoDataValue(nodata_out)
        band.WriteArray(ndvi)
        cog.CreateCopy(w["out"], ds, options=options)
        ds = None
    elapsed = (time.perf_counter() - started) * 1000
    cpu = (time.process_time() - cpu_started) * 1000
    sizes = [os.path.getsize(w["out"]) for w in spec["windows"]]  # after the clock: not part of the work
    return {"elapsedMs": elapsed, "cpuMs": cpu, "tiles": len(spec["windows"]), "bytes": sizes}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
