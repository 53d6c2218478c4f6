"""Check that two sets of NDVI tiles hold the same pixels and the same layout, with GDAL as the reader.

For each pair: size, geotransform, nodata, block size, compression, predictor,
overview count, the nodata mask pixel for pixel, and the largest difference of
the valid pixels; plus GDAL's own COG validator on both files. Input: one JSON
argument {"pairs": [{"name", "reference", "candidate"}]}; output: one JSON line.
"""
import json
import sys

import numpy as np
from osgeo import gdal
from osgeo_utils.samples import validate_cloud_optimized_geotiff as cog_validator

gdal.UseExceptions()


def describe(path):
    ds = gdal.Open(path)
    band = ds.GetRasterBand(1)
    image = ds.GetMetadata("IMAGE_STRUCTURE")
    return ds, band, {
        "size": [ds.RasterXSize, ds.RasterYSize],
        "geoTransform": list(ds.GetGeoTransform()),
        "noData": band.GetNoDataValue(),
        "block": band.GetBlockSize(),
        "type": gdal.GetDataTypeName(band.DataType),
        "compression": image.get("COMPRESSION"),
        "predictor": image.get("PREDICTOR"),
        "overviews": band.GetOverviewCount(),
    }


def cog_errors(path):
    try:
        _warnings, errors, _details = cog_validator.validate(path, full_check=True)
        return errors
    except Exception as error:  # the validator raises on files it cannot read at all
        return [str(error)]


def compare(pair):
    _rds, rband, ref = describe(pair["reference"])
    _cds, cband, cand = describe(pair["candidate"])
    out = {"name": pair["name"], "reference": ref, "candidate": cand}
    layout = [k for k in ("size", "noData", "block", "type", "compression", "predictor", "overviews") if ref[k] != cand[k]]
    gt_diff = max(abs(a - b) for a, b in zip(ref["geoTransform"], cand["geoTransform"]))
    if gt_diff > 1e-6:
        layout.append("geoTransform")
    out["layoutDiffers"] = layout
    out["cogErrors"] = {"reference": cog_errors(pair["reference"]), "candidate": cog_errors(pair["candidate"])}
    if "size" in layout:
        out.update(maskMismatches=-1, maxAbsDiff=float("inf"), validPixels=0)
        return out
    r = rband.ReadAsArray().astype(np.float64)
    c = cband.ReadAsArray().astype(np.float64)
    r_nodata = (r == ref["noData"]) | np.isnan(r)
    c_nodata = (c == cand["noData"]) | np.isnan(c)
    valid = ~r_nodata & ~c_nodata
    out["maskMismatches"] = int(np.count_nonzero(r_nodata != c_nodata))
    out["validPixels"] = int(np.count_nonzero(valid))
    out["maxAbsDiff"] = float(np.max(np.abs(r[valid] - c[valid]))) if out["validPixels"] else 0.0
    return out


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    print(json.dumps({"pairs": [compare(p) for p in spec["pairs"]]}))
