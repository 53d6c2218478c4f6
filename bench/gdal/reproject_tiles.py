"""GDAL as a library, warm: reprojected NDVI tiles, the baseline of bench/sections/reproject.ts.

The same work as Tessera's renderTile on a reprojected scene: per tile, gdalwarp of the scene's two bands
(B04 = band 1, B08 = band 2) onto the tile's target grid (the same CRS, geotransform, size and resampling
Tessera's tile job names) into a MEM dataset, NDVI in numpy (float64; a pixel nodata in either warped band,
or with a zero denominator, is the output nodata), then the COG driver's CreateCopy to /vsimem with the same
block size, codec, level, floating-point predictor and averaged overviews. One process for every tile, the
scene opened once: no interpreter or library start-up per tile. Timed: the loop, wall and CPU. Tiles with an
`out` path are copied to disk after the clock, for the comparison. Input: one JSON argument; output: one
JSON line.
"""
import json
import sys
import time

import numpy as np
from osgeo import gdal

gdal.UseExceptions()


def main(spec):
    started = time.perf_counter()
    cpu_started = time.process_time()  # CPU time of the process: the work, whatever else the core ran
    src = gdal.Open(spec["scene"])
    nodata_in, nodata_out = spec["noDataIn"], spec["noDataOut"]
    options = [
        f"BLOCKSIZE={spec['blockSize']}",
        f"COMPRESS={spec.get('compression', 'DEFLATE')}",
        "PREDICTOR=YES",
        f"LEVEL={spec['level']}",
        "RESAMPLING=AVERAGE",
    ]
    cog = gdal.GetDriverByName("COG")
    dst_srs = spec["dstSrs"]
    sizes, kept = [], []
    for k, t in enumerate(spec["tiles"]):
        gt, width, height = t["geoTransform"], t["width"], t["height"]
        bounds = [gt[0], gt[3] + height * gt[5], gt[0] + width * gt[1], gt[3]]
        # Both bands in one warp (GDAL's way: one transformer per tile); each band keeps its own nodata mask
        # (per-band source validity, GDAL's default for per-band nodata), as Tessera warps band by band.
        ds = gdal.Warp("", src, format="MEM", dstSRS=dst_srs, outputBounds=bounds, width=width, height=height,
                       resampleAlg=spec["resampling"], srcNodata=nodata_in, dstNodata=nodata_in,
                       multithread=False)
        red, nir = ds.GetRasterBand(1), ds.GetRasterBand(2)
        a = red.ReadAsArray().astype(np.float64)
        b = nir.ReadAsArray().astype(np.float64)
        valid = (red.GetMaskBand().ReadAsArray() != 0) & (nir.GetMaskBand().ReadAsArray() != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = b + a
            ndvi = np.where(valid & (s != 0), (b - a) / np.where(s == 0, 1, s), nodata_out).astype(np.float32)
        out = gdal.GetDriverByName("MEM").Create("", width, height, 1, gdal.GDT_Float32)
        out.SetGeoTransform(gt)
        out.SetProjection(ds.GetProjection())
        band = out.GetRasterBand(1)
        band.SetNoDataValue(nodata_out)
        band.WriteArray(ndvi)
        path = f"/vsimem/reproject-{k}.tif"
        cog.CreateCopy(path, out, options=options)
        out = ds = None
        sizes.append(gdal.VSIStatL(path).size)
        if t.get("out"):
            kept.append((path, t["out"]))
        else:
            gdal.Unlink(path)
    elapsed = (time.perf_counter() - started) * 1000
    cpu = (time.process_time() - cpu_started) * 1000
    for path, dest in kept:  # after the clock: not part of the work
        f = gdal.VSIFOpenL(path, "rb")
        data = gdal.VSIFReadL(1, gdal.VSIStatL(path).size, f)
        gdal.VSIFCloseL(f)
        with open(dest, "wb") as fh:
            fh.write(data)
        gdal.Unlink(path)
    return {"elapsedMs": elapsed, "cpuMs": cpu, "tiles": len(spec["tiles"]), "bytes": sizes}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
