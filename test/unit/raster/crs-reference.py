"""GDAL's reading of CRSs without an EPSG code, for test/unit/raster/crs-definition.test.ts (issue 29, section 2).

Usage: python3 crs-reference.py write|read|check < request.json > answer.json

write: [{"name", "srs", "path", "geoTransform", "width", "height"}]
  Writes each raster as `gdal_translate -a_srs <srs>` writes it (osgeo.gdal.Translate with outputSRS, from a float32
  ramp made with numpy), reads the file back with GDAL and answers, per raster: the CRS as GDAL exports it (WKT 1,
  WKT2:2019, PROJJSON, PROJ), and where GDAL puts sample pixel corners in longitude/latitude: on EPSG:4326 for an
  Earth CRS (PROJ's transformation, a ballpark one when the datum is unknown, as proj4js's), on the CRS's own
  geographic CRS for another body.
read: [{"name", "path"}]
  The same answer for files that exist (rasterio's test files with user-defined CRSs).
check: [{"name", "reference", "wkt", "tiff", "points"}]
  Reads Tessera's WKT2 text and Tessera's GeoTIFF with GDAL and answers, per entry, the PROJ string GDAL exports for
  each and for `reference` (the test compares their canonical forms: the same parameters, whatever the names), and how
  far apart the points (x, y in the reference CRS) land in longitude/latitude through each CRS (GDAL's
  transformations, in degrees).
"""
import json
import sys

import numpy as np
from osgeo import gdal, osr

gdal.UseExceptions()
osr.UseExceptions()


def srs_from(text):
    s = osr.SpatialReference()
    s.SetFromUserInput(text)
    s.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    return s


def lonlat_of(srs):
    """EPSG:4326 for an Earth CRS, else the CRS's own geographic CRS."""
    a = srs.GetSemiMajor()
    if 6.35e6 <= a <= 6.4e6:
        g = osr.SpatialReference()
        g.ImportFromEPSG(4326)
    else:
        g = srs.CloneGeogCS()
    g.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    return g


def sample_pixels(width, height):
    return [(0, 0), (width, 0), (0, height), (width, height), (width / 2, height / 2), (width / 4, 3 * height / 4)]


def write(requests):
    out = []
    for r in requests:
        w, h, gt = r['width'], r['height'], r['geoTransform']
        base = gdal.GetDriverByName('MEM').Create('', w, h, 1, gdal.GDT_Float32)
        base.SetGeoTransform(gt)
        yy, xx = np.mgrid[0:h, 0:w]
        base.GetRasterBand(1).WriteArray((xx * 3.0 + yy * 7.0 + 1.0).astype(np.float32))
        gdal.Translate(r['path'], base, outputSRS=r['srs'])
        out.append(read_one(r['name'], r['path']))
    return out


def read_one(name, path):
    """GDAL's CRS of a file, its exports, and where GDAL puts sample pixel corners in longitude/latitude."""
    ds = gdal.Open(path)
    w, h = ds.RasterXSize, ds.RasterYSize
    srs = ds.GetSpatialRef()
    srs.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    fgt = ds.GetGeoTransform()
    t = osr.CoordinateTransformation(srs, lonlat_of(srs))
    points = []
    for px, py in sample_pixels(w, h):
        x, y = fgt[0] + px * fgt[1] + py * fgt[2], fgt[3] + px * fgt[4] + py * fgt[5]
        lon, lat, _ = t.TransformPoint(x, y)
        points.append({'x': x, 'y': y, 'lon': lon, 'lat': lat})
    return {
        'name': name,
        'wkt1': srs.ExportToWkt(),
        'wkt2': srs.ExportToWkt(['FORMAT=WKT2_2019']),
        'projjson': srs.ExportToPROJJSON(),
        'proj4': srs.ExportToProj4(),
        'epsg': srs.GetAuthorityCode(None),
        'points': points,
    }


def check(requests):
    out = []
    for r in requests:
        ref = srs_from(r['reference'])
        result = {'name': r['name']}
        for kind in ('wkt', 'tiff'):
            if not r.get(kind):
                continue
            if kind == 'wkt':
                ours = srs_from(r['wkt'])
            else:
                ours = gdal.Open(r['tiff']).GetSpatialRef()
                ours.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
            tr = osr.CoordinateTransformation(ref, lonlat_of(ref))
            to = osr.CoordinateTransformation(ours, lonlat_of(ours))
            worst = 0.0
            for x, y in r['points']:
                a = tr.TransformPoint(x, y)
                b = to.TransformPoint(x, y)
                worst = max(worst, abs(a[0] - b[0]), abs(a[1] - b[1]))
            result[kind] = {'maxDegrees': worst, 'proj4': ours.ExportToProj4()}
        result['referenceProj4'] = ref.ExportToProj4()
        out.append(result)
    return out


if __name__ == '__main__':
    mode = sys.argv[1] if len(sys.argv) > 1 else ''
    req = json.load(sys.stdin)
    if mode == 'write':
        json.dump(write(req), sys.stdout)
    elif mode == 'read':
        json.dump([read_one(r['name'], r['path']) for r in req], sys.stdout)
    elif mode == 'check':
        json.dump(check(req), sys.stdout)
    else:
        sys.stderr.write('usage: crs-reference.py write|check < request.json\n')
        sys.exit(2)
