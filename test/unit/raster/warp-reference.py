"""gdalwarp (osgeo.gdal 3.6) as the reference for shared/raster/warp.ts: test/unit/raster/warp.test.ts.

Usage: python3 warp-reference.py REQUEST.json; REQUEST: {"out": dir, "source": path, "band": n,
"cases": [{"name", "resampling", "dstSrs", "te": [xmin, ymin, xmax, ymax], "ts": [w, h]}]}.
Writes, per case, OUT/<name>.bin (float64 gdalwarp result, nodata -> NaN) and once OUT/source.bin (the band
as float64, nodata -> NaN) and prints the source's size, geotransform, EPSG code and nodata as JSON.
"""
import json
import os
import sys

import numpy as np
from osgeo import gdal

gdal.UseExceptions()
req = json.load(open(sys.argv[1]))
out = req['out']
if req['source'] == 'synthetic':
    # A smooth float32 field with texture, in UTM 31N, nodata -9999 in a block and a diagonal stripe.
    h, w = 240, 300
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    field = 1000 + 300 * np.sin(xx / 17.0) * np.cos(yy / 23.0) + 0.05 * (xx * yy) + 20 * np.sin(xx * yy / 500.0)
    field[60:90, 100:140] = -9999
    field[np.abs(xx - yy - 50) < 2] = -9999
    drv = gdal.GetDriverByName('GTiff')
    src = drv.Create(os.path.join(out, 'synthetic.tif'), w, h, 1, gdal.GDT_Float32)
    src.SetGeoTransform([430000.0, 30.0, 0.0, 5300000.0, 0.0, -30.0])
    src.SetProjection('EPSG:32631')
    src.GetRasterBand(1).SetNoDataValue(-9999)
    src.GetRasterBand(1).WriteArray(field.astype(np.float32))
    src = None
    req['source'] = os.path.join(out, 'synthetic.tif')
# One band on its own, so gdalwarp's source mask is that band's nodata alone (as Tessera warps band by band).
single = gdal.Translate(os.path.join(out, 'band.tif'), req['source'], bandList=[req['band']])
band = single.GetRasterBand(1)
nodata = band.GetNoDataValue()
arr = band.ReadAsArray().astype(np.float64)
if nodata is not None:
    arr[arr == nodata] = np.nan
arr.astype('<f8').tofile(os.path.join(out, 'source.bin'))
srs = single.GetSpatialRef()
facts = {
    'size': [single.RasterXSize, single.RasterYSize],
    'geoTransform': list(single.GetGeoTransform()),
    'epsg': int(srs.GetAuthorityCode(None)),
    'noData': None if nodata is None else ('nan' if nodata != nodata else nodata),
    'dataType': gdal.GetDataTypeName(band.DataType),
}
for case in req['cases']:
    ds = gdal.Warp('', single, format='MEM', dstSRS=case['dstSrs'], outputBounds=case['te'],
                   width=case['ts'][0], height=case['ts'][1], resampleAlg=case['resampling'],
                   dstNodata=nodata if nodata is not None else None)
    b = ds.GetRasterBand(1)
    res = b.ReadAsArray().astype(np.float64)
    mask = b.GetMaskBand().ReadAsArray()
    res[mask == 0] = np.nan
    res.astype('<f8').tofile(os.path.join(out, case['name'] + '.bin'))
print(json.dumps(facts))
