"""Tessera's reprojected mosaic against GDAL's, on the mosaic's own grid (issue 14, section 5).

Usage:
  python3 gdal-warp-compare.py --mosaic OURS.vrt|OURS.tif --band B04=red.tif[:1] --band B08=nir.tif[:1] \
      --expression '(B08 - B04) / (B08 + B04)' --resampling bilinear [--tolerance 1e-3] [--relative] \
      [--whole-grid '{"geoTransform": [...], "width": W, "height": H}'] [--unscale [--scale-offset NAME=SCALE,OFFSET]]

The reference is built as the issue says, from Tessera's output grid only (never from its pixels):
  1. the mosaic's CRS, geotransform and size are read with GDAL;
  2. each band is warped by `gdalwarp -r <resampling> -t_srs <the mosaic's CRS> -te <its extent> -tr <its pixel size>`
     (osgeo.gdal.Warp with the same options, and -ovr NONE: the full-resolution band, as Tessera reads it), one band
     at a time onto the same grid, so that each band's mask is its
     own nodata (as Tessera warps band by band; a multi-band `gdalbuildvrt -separate` stack would first resample bands
     of other resolutions onto one grid, a second resampling Tessera does not do). The output type is the source's,
     as plain gdalwarp writes it (integer sources are rounded after resampling);
  2a. --src-mask (issue 29): each band's validity is GDAL's mask band (`gdalwarp -srcnodata None -dstalpha`): a
     file's internal mask, not its nodata value, as GDAL's GetMaskBand gives it (a JPEG-compressed file with both);
  2b. --unscale (issue 29): each warped band through `gdal_translate -unscale -ot Float32` (osgeo.gdal.Translate with
     unscale=True), with the band's scale and offset: the source file's own (GDAL metadata, -a_scale/-a_offset), or
     the ones --scale-offset names (a STAC Item's raster:bands, which the file does not carry). Validity stays the
     raw band's (gdal_translate keeps the raw nodata value, so its mask would be wrong after the scale);
  3. the band math in numpy, in float64, as shared/raster/expression.ts does: a pixel is nodata when any band the
     expression reads is nodata in its warp, on division by zero, and when the result is not a finite float32; the
     rest is rounded to float32 once.

One chunk: gdalwarp splits a destination into chunks (GDALWarpOperation::CollectChunkList) when it exceeds the warp
memory (-wm) or when the source covers less than half of it (the undocumented SRC_FILL_RATIO_HEURISTICS, on by
default), and approximates each chunk's rows on their own, so the same grid gives other pixels (up to 0.125 px
elsewhere) depending on how much of it lies outside the source: a tile matrix set's grid, whose corners are empty,
is cut into a dozen chunks. Tessera renders the grid as gdalwarp does in one chunk, so the reference is warped
with `-wo SRC_FILL_RATIO_HEURISTICS=NO -wm 2048` and the script checks (from GDAL's debug messages) that it was
one chunk. --gdal-chunking keeps gdalwarp's own chunking instead (reported as `chunks`).

--whole-grid: OURS is one tile of a larger grid (a scene's target grid, in OURS's CRS) and is compared with the
whole grid's warp at its window, not with a warp of the tile on its own. gdalwarp approximates the transform row by
row across the grid it warps (-et 0.125), so a tile warped on its own samples up to 0.125 px elsewhere; Tessera
renders each tile as the window of the whole grid's warp. The reference warps the grid's rows the tile covers, at
the grid's full width (rows are approximated independently, so they are those rows of the whole warp).

Compared on every pixel of the grid: validity (the nodata masks), and on the pixels valid in both the values, as
float32: identical, and within the tolerance (absolute by default: |ours - gdal| <= tol; --relative:
|ours - gdal| <= tol * max(1, |gdal|)). Prints one JSON object; exits 0 whatever the figures (the caller asserts the
thresholds) and 2 on bad input.
"""
import argparse
import ast
import json
import math
import sys

import numpy as np
from osgeo import gdal, osr

gdal.UseExceptions()

FLOAT32_MAX = float(np.finfo(np.float32).max)
RESAMPLINGS = ('nearest', 'bilinear', 'cubic', 'cubicspline', 'lanczos', 'average', 'rms', 'mode', 'max', 'min', 'med',
               'q1', 'q3', 'sum')


def fail(message):
    sys.stderr.write(f'gdal-warp-compare: {message}\n')
    sys.exit(2)


def parse_band(text):
    """NAME=PATH[:INDEX] -> (name, path, 1-based index)."""
    if '=' not in text:
        fail(f'--band {text!r}: expected NAME=PATH[:INDEX]')
    name, rest = text.split('=', 1)
    path, index = rest, 1
    head, sep, tail = rest.rpartition(':')
    if sep and tail.isdigit():
        path, index = head, int(tail)
    if not name.isidentifier() or not path or index < 1:
        fail(f'--band {text!r}: expected NAME=PATH[:INDEX] with a band name, a path and a 1-based index')
    return name, path, index


def compile_expression(text, names):
    """Tessera's grammar (numbers, bands, + - * /, unary -/+, abs sqrt min max) is a subset of Python's: parse it
    with ast and evaluate only those nodes, with Tessera's rules for division by zero and sqrt of a negative."""
    try:
        tree = ast.parse(text, mode='eval')
    except SyntaxError as e:
        fail(f'--expression {text!r}: {e.msg}')
    used = []

    def ev(node, bands):
        if isinstance(node, ast.Expression):
            return ev(node.body, bands)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                fail(f'--expression reads band {node.id!r}, which no --band names')
            return bands[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand, bands)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = ev(node.left, bands), ev(node.right, bands)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            # Division by zero is nodata (NaN here), whatever IEEE says, as in expression.ts.
            with np.errstate(divide='ignore', invalid='ignore'):
                return np.where(np.asarray(b) == 0, np.nan, np.asarray(a, dtype=np.float64) / np.where(np.asarray(b) == 0, 1, b))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            args = [ev(a, bands) for a in node.args]
            fn = node.func.id
            if fn == 'abs' and len(args) == 1:
                return np.abs(args[0])
            if fn == 'sqrt' and len(args) == 1:
                with np.errstate(invalid='ignore'):
                    return np.sqrt(args[0])  # NaN for a negative: nodata
            if fn in ('min', 'max') and 2 <= len(args) <= 16:
                f = np.minimum if fn == 'min' else np.maximum  # both propagate NaN, as Math.min/max do
                out = args[0]
                for a in args[1:]:
                    out = f(out, a)
                return out
        fail(f'--expression {text!r}: {ast.dump(node)[:80]} is not in Tessera\'s expression grammar')

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names and node.id not in used:
            used.append(node.id)
    return (lambda bands: ev(tree, bands)), used


def epsg_of(srs):
    if srs is None:
        return None
    code = srs.GetAuthorityCode(None)
    return int(code) if code else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--mosaic', required=True, help="Tessera's mosaic (the VRT or the COG mosaic)")
    p.add_argument('--band', action='append', required=True, help='NAME=PATH[:INDEX], one per band the expression reads')
    p.add_argument('--expression', required=True)
    p.add_argument('--resampling', required=True, choices=RESAMPLINGS)
    p.add_argument('--tolerance', type=float, default=1e-3)
    p.add_argument('--relative', action='store_true', help='tolerance relative to max(1, |gdal|) instead of absolute')
    p.add_argument('--whole-grid', help='JSON {geoTransform, width, height}: OURS is a window of this grid')
    p.add_argument('--gdal-chunking', action='store_true', help="gdalwarp's own chunking, not one chunk")
    p.add_argument('--unscale', action='store_true', help='gdal_translate -unscale -ot Float32 each warped band')
    p.add_argument('--src-mask', action='store_true',
                   help="the source's validity is its mask band, not its nodata value (gdalwarp -srcnodata None)")
    p.add_argument('--dst-srs',
                   help="the target CRS as given to tessera run --crs (WKT, PROJJSON, PROJ): GDAL's own reading of the text the "
                        "user gave, rather than of the mosaic's SRS, which Tessera wrote (issue 29)")
    p.add_argument('--scale-offset', action='append', default=[],
                   help='NAME=SCALE,OFFSET: the scale and offset --unscale applies to band NAME instead of its file\'s')
    args = p.parse_args()
    explicit = {}
    for text in args.scale_offset:
        name, _, pair = text.partition('=')
        try:
            scale, offset = (float(x) for x in pair.split(','))
        except ValueError:
            fail(f'--scale-offset {text!r}: expected NAME=SCALE,OFFSET')
        explicit[name] = (scale, offset)

    bands = [parse_band(b) for b in args.band]
    names = [b[0] for b in bands]
    if len(set(names)) != len(names):
        fail(f'--band names a band twice: {names}')
    evaluate, used = compile_expression(args.expression, set(names))

    # 1. Our grid.
    ours = gdal.Open(args.mosaic)
    gt = ours.GetGeoTransform()
    if gt[2] != 0 or gt[4] != 0:
        fail(f'{args.mosaic}: a rotated geotransform {gt} is not a target grid')
    width, height = ours.RasterXSize, ours.RasterYSize
    srs = ours.GetSpatialRef()
    if srs is None:
        fail(f'{args.mosaic} has no CRS')
    te = [gt[0], gt[3] + height * gt[5], gt[0] + width * gt[1], gt[3]]
    tr = [gt[1], abs(gt[5])]
    # The reference's own grid: the mosaic's, or the rows of the whole grid the tile covers (then cropped to it).
    warp_te, warp_size, crop = te, (width, height), (0, 0)
    if args.whole_grid:
        whole = json.loads(args.whole_grid)
        wgt, ww = whole['geoTransform'], whole['width']
        col, row = (gt[0] - wgt[0]) / wgt[1], (gt[3] - wgt[3]) / wgt[5]
        if abs(col - round(col)) > 1e-6 or abs(row - round(row)) > 1e-6 or abs(gt[1] - wgt[1]) > 1e-9 * abs(wgt[1]):
            fail(f'{args.mosaic} is not pixel-aligned on the whole grid {wgt}: offset ({col}, {row}) pixels')
        col, row = int(round(col)), int(round(row))
        if col < 0 or row < 0 or col + width > ww or row + height > whole['height']:
            fail(f'{args.mosaic} at ({col}, {row}) does not lie inside the {ww}x{whole["height"]} whole grid')
        warp_te = [wgt[0], wgt[3] + (row + height) * wgt[5], wgt[0] + ww * wgt[1], wgt[3] + row * wgt[5]]
        warp_size, crop = (ww, height), (col, row)
        tr = [wgt[1], abs(wgt[5])]
    ob = ours.GetRasterBand(1)
    out_nodata = ob.GetNoDataValue()
    if out_nodata is None:
        fail(f'{args.mosaic} declares no nodata value: cannot tell its nodata pixels')
    ov = ob.ReadAsArray().astype(np.float32)
    our_valid = ~(np.isnan(ov) if math.isnan(out_nodata) else (ov == np.float32(out_nodata)))

    # 2. gdalwarp of each band onto that grid.
    warped, valid, sources, chunks = {}, {}, {}, {}
    dst_wkt = srs.ExportToWkt()
    if args.dst_srs:
        given = osr.SpatialReference()
        given.SetFromUserInput(args.dst_srs)
        dst_wkt = given.ExportToWkt()
    chunk_options = {} if args.gdal_chunking else {'warpOptions': ['SRC_FILL_RATIO_HEURISTICS=NO'], 'warpMemoryLimit': 2048}
    kernel_calls = []

    def on_message(level, _code, message):
        # GDALWarpKernel::PerformWarp logs one debug line per chunk it warps.
        if level == gdal.CE_Debug and 'GDALWarpKernel()::' in message:
            kernel_calls.append(message)

    gdal.SetConfigOption('CPL_DEBUG', 'ON')
    gdal.PushErrorHandler(on_message)
    for name, path, index in bands:
        if name not in used:
            continue
        src = gdal.Open(path)
        if index > src.RasterCount:
            fail(f'--band {name}={path}:{index}: the file has {src.RasterCount} band(s)')
        one = gdal.Translate('', src, format='VRT', bandList=[index])
        nodata = one.GetRasterBand(1).GetNoDataValue()
        before = len(kernel_calls)
        # Without a source nodata, an alpha band says which target pixels the source covers (-dstalpha).
        # --src-mask: GDAL's mask band decides (a file's internal mask wins over its nodata value, as GetMaskBand
        # says), which gdalwarp does only when told to forget the nodata value.
        coverage = {'dstNodata': nodata} if nodata is not None and not args.src_mask else {'dstAlpha': True}
        if args.src_mask:
            coverage['options'] = ['-srcnodata', 'None']
        # The full-resolution band, as Tessera reads it (it chooses no overview yet: docs/geotiff.md); gdalwarp's
        # default (-ovr AUTO) would read an overview when the target is coarser than it.
        ds = gdal.Warp('', one, format='MEM', dstSRS=dst_wkt, outputBounds=warp_te, xRes=tr[0], yRes=tr[1],
                       resampleAlg=args.resampling, overviewLevel='NONE', **coverage, **chunk_options)
        chunks[name] = len(kernel_calls) - before
        if not args.gdal_chunking and chunks[name] != 1:
            fail(f'gdalwarp of {name} ran in {chunks[name]} chunks, not one: {kernel_calls[before:][:3]}')
        if (ds.RasterXSize, ds.RasterYSize) != warp_size:
            fail(f'gdalwarp -te {warp_te} -tr {tr} made {ds.RasterXSize}x{ds.RasterYSize}, not {warp_size[0]}x{warp_size[1]}')
        b = ds.GetRasterBand(1)
        x0 = crop[0]
        # With -dstalpha the alpha band (band 2) says which pixels the source covers. GDAL's mask band would too for a
        # Byte or UInt16 band, but a Float32 band's alpha is also Float32, and GDAL then reports every pixel valid
        # (GMF_ALL_VALID): a float source without nodata would count its pixels outside the footprint as data.
        mask = ds.GetRasterBand(2) if 'dstAlpha' in coverage else b.GetMaskBand()
        valid[name] = mask.ReadAsArray(x0, 0, width, height) != 0
        if args.unscale:
            raw = one.GetRasterBand(1)
            scale, offset = explicit.get(name, (raw.GetScale() or 1.0, raw.GetOffset() or 0.0))
            b.SetScale(scale)
            b.SetOffset(offset)
            physical = gdal.Translate('', ds, format='MEM', unscale=True, outputType=gdal.GDT_Float32)
            warped[name] = physical.GetRasterBand(1).ReadAsArray(x0, 0, width, height).astype(np.float64)
            sources_unscale = {'scale': scale, 'offset': offset}
        else:
            warped[name] = b.ReadAsArray(x0, 0, width, height).astype(np.float64)
            sources_unscale = None
        sources[name] = {'path': path, 'band': index, 'size': [src.RasterXSize, src.RasterYSize],
                         'pixelSize': [src.GetGeoTransform()[1], src.GetGeoTransform()[5]],
                         'epsg': epsg_of(src.GetSpatialRef()), 'noData': nodata,
                         'dataType': gdal.GetDataTypeName(b.DataType), 'unscale': sources_unscale}

    gdal.PopErrorHandler()
    gdal.SetConfigOption('CPL_DEBUG', None)

    # 3. The band math.
    with np.errstate(all='ignore'):
        v = np.asarray(evaluate(warped), dtype=np.float64)
        if v.ndim == 0:
            v = np.full((height, width), float(v))
        ref_valid = np.isfinite(v) & (np.abs(v) <= FLOAT32_MAX)
        for name in used:
            ref_valid &= valid[name]
        ref = np.where(ref_valid, v, 0).astype(np.float32)

    # Compare.
    both = our_valid & ref_valid
    n_both = int(both.sum())
    o, g = ov[both].astype(np.float64), ref[both].astype(np.float64)
    diff = np.abs(o - g)
    bound = args.tolerance * (np.maximum(1.0, np.abs(g)) if args.relative else 1.0)
    pixels = width * height
    mask_agree = int((our_valid == ref_valid).sum())
    pct = lambda k, n: (100.0 * k / n) if n else None
    result = {
        'mosaic': {'path': args.mosaic, 'epsg': epsg_of(srs), 'geoTransform': list(gt), 'size': [width, height],
                   'noData': 'nan' if math.isnan(out_nodata) else out_nodata},
        'reference': f'gdalwarp -r {args.resampling} -t_srs EPSG:{epsg_of(srs)} -te {" ".join(repr(x) for x in warp_te)} '
                     f'-tr {tr[0]!r} {tr[1]!r} per band, then the band math in numpy (GDAL {gdal.__version__})'
                     + (' (its own chunking)' if args.gdal_chunking else ' (-wo SRC_FILL_RATIO_HEURISTICS=NO -wm 2048: one chunk)')
                     + (f', window ({crop[0]}, {crop[1]}) {width}x{height} of the whole grid' if args.whole_grid else '')
                     + (', each band through gdal_translate -unscale -ot Float32' if args.unscale else ''),
        'sources': sources,
        'chunks': chunks,
        'expression': args.expression,
        'resampling': args.resampling,
        'pixels': pixels,
        'validOurs': int(our_valid.sum()),
        'validGdal': int(ref_valid.sum()),
        'validBoth': n_both,
        'identical': int((diff == 0).sum()),
        'identicalPct': pct(int((diff == 0).sum()), n_both),
        'withinTolerance': int((diff <= bound).sum()),
        'withinTolerancePct': pct(int((diff <= bound).sum()), n_both),
        'tolerance': args.tolerance,
        'toleranceKind': 'relative' if args.relative else 'absolute',
        'maxAbsDiff': float(diff.max()) if n_both else None,
        'meanAbsDiff': float(diff.mean()) if n_both else None,
        'maskAgree': mask_agree,
        'maskAgreePct': pct(mask_agree, pixels),
        'validOnlyOurs': int((our_valid & ~ref_valid).sum()),
        'validOnlyGdal': int((ref_valid & ~our_valid).sum()),
    }
    print(json.dumps(result))


if __name__ == '__main__':
    main()
