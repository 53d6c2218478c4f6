"""What GDAL (the Python bindings, osgeo.gdal) reads from GeoTIFFs: the reference test/unit/raster/geotiff-layouts.test.ts compares Tessera's reader with.

Usage: python3 gdal-reference.py OUT_DIR FILE...; prints one JSON object, file -> facts. Band pixels are
written to OUT_DIR as raw little-endian arrays of GDAL's own data type (bit-exact floats), masks as uint8.
"""
import json
import os
import sys

import numpy as np
from osgeo import gdal

gdal.UseExceptions()
out_dir = sys.argv[1]
facts = {}


def dump(array, name):
    path = os.path.join(out_dir, name)
    arr = np.ascontiguousarray(array)
    arr.astype(arr.dtype.newbyteorder('<'), copy=False).tofile(path)
    return path


def bands_of(ds, prefix):
    out = []
    for b in range(1, ds.RasterCount + 1):
        band = ds.GetRasterBand(b)
        arr = band.ReadAsArray()
        # GDAL 3.6 reads SIGNEDBYTE (int8) as Byte with a metadata flag; 3.7+ has Int8.
        if band.GetMetadataItem('PIXELTYPE', 'IMAGE_STRUCTURE') == 'SIGNEDBYTE':
            arr = arr.view(np.int8)
        out.append({'dtype': str(arr.dtype), 'bin': dump(arr, f'{prefix}-b{b}.bin')})
    return out


for i, path in enumerate(sys.argv[2:]):
    ds = gdal.Open(path)
    srs = ds.GetSpatialRef()
    b1 = ds.GetRasterBand(1)
    flags = b1.GetMaskFlags()
    entry = {
        'size': [ds.RasterXSize, ds.RasterYSize],
        'bandCount': ds.RasterCount,
        'geoTransform': list(ds.GetGeoTransform(can_return_null=True) or []),
        'epsg': int(srs.GetAuthorityCode(None)) if srs is not None and srs.GetAuthorityCode(None) else None,
        'gcpCount': ds.GetGCPCount(),
        'noData': [
            (None if v is None else ('nan' if v != v else v))
            for v in (ds.GetRasterBand(b).GetNoDataValue() for b in range(1, ds.RasterCount + 1))
        ],
        'scale': [ds.GetRasterBand(b).GetScale() for b in range(1, ds.RasterCount + 1)],
        'offset': [ds.GetRasterBand(b).GetOffset() for b in range(1, ds.RasterCount + 1)],
        'bands': bands_of(ds, f'f{i}'),
        # A per-dataset mask that is neither alpha nor nodata: a mask stored in the file.
        'mask': dump(b1.GetMaskBand().ReadAsArray(), f'f{i}-mask.bin') if flags == gdal.GMF_PER_DATASET else None,
        'overviews': [],
    }
    for o in range(b1.GetOverviewCount()):
        ovr = [ds.GetRasterBand(b).GetOverview(o) for b in range(1, ds.RasterCount + 1)]
        mask = ovr[0].GetMaskBand() if flags == gdal.GMF_PER_DATASET else None
        entry['overviews'].append({
            'size': [ovr[0].XSize, ovr[0].YSize],
            'bands': [{'dtype': str(a.dtype), 'bin': dump(a, f'f{i}-o{o}-b{b}.bin')} for b, a in enumerate(x.ReadAsArray() for x in ovr)],
            'mask': dump(mask.ReadAsArray(), f'f{i}-o{o}-mask.bin') if mask is not None else None,
        })
    facts[path] = entry
print(json.dumps(facts))
