"""rio-tiler (the library behind TiTiler) rendering reprojected NDVI GeoTIFF tiles, one warm process.

The rio-tiler row of bench/sections/rio-tiler.ts (issue 30 target 3). What a TiTiler deployment does per
`/tiles/{z}/{x}/{y}.tif?expression=...` request, in a loop over the tiles Tessera renders and without the HTTP server:

- timed, per tile: Reader.tile(x, y, z, expression=...) (a WarpedVRT of the scene's two bands onto the tile, nearest
  unless `resampling` says otherwise, the source nodata masked; the expression by numexpr, float64), then the tile as
  Tessera writes it: float32, masked pixels set to the output nodata, encoded by rio_tiler.utils.render (the function
  ImageData.render calls) as a GTiff with one 256 px block, DEFLATE at the given level and the floating-point
  predictor (PREDICTOR=3), georeferenced (transform and CRS, as ImageData.render adds for GTiff), nodata set.
  ImageData.render itself is not called: without add_mask it writes the masked pixels' raw values (not nodata), and
  with it an alpha band the size of the data band, which Tessera's tile does not carry.
- the scene is opened once, inside the clock (Tessera's timed loop opens its source in the first tile too), after one
  untimed warm-up tile through another Reader of the same file (imports, GDAL's drivers and PROJ's database loaded;
  the warm-up's blocks go with its dataset, so the timed tiles read and inflate their own).
- untimed, after the clock: the tiles with an `out` path written to disk (for the comparison), and the tile set at
  that zoom as a TileJSON-driven client would request it (morecantile's tiles over the scene's geographic bounds), with
  those rio-tiler answers TileOutsideBounds for (TiTiler's 404: corners of a UTM scene's bounding box in Web Mercator
  that miss the footprint; Tessera writes them, all nodata).

Input: one JSON argument {mode: "render", scene, zoom, expression, resampling, noData, level, blockSize, warmup: [x, y],
tiles: [{x, y, out?}]}; output: one JSON line {elapsedMs, cpuMs, tiles, bytes, perTileMs, tileMs, encodeMs, tileSet,
outsideFootprint, versions}. Both contenders run pinned to the same core by the parent.

With {mode: "compare", pairs: [{name, reference, candidate}], noData, tolerance}: two tiles of the same z/x/y read
with rasterio, their layout (size, type, nodata, block, compression, predictor, band count, georeferencing) and pixels
(nodata masks, identical values, values within the tolerance, the largest and the 99th percentile difference)
compared; output {pairs: [...]}.
"""
import json
import sys
import time
import warnings

import morecantile
import numpy as np
import rasterio
import rio_tiler
from rio_tiler.errors import NoOverviewWarning
from rio_tiler.io import Reader
from rio_tiler.utils import render

# The synthetic scene has no internal overviews (neither has a band file as published); rio-tiler warns once per open.
warnings.filterwarnings("ignore", category=NoOverviewWarning)


def _encode(img, spec):
    """The tile as Tessera writes it: float32, nodata where rio-tiler's mask says, one DEFLATE block, PREDICTOR=3."""
    data = img.array.astype(np.float32).filled(spec["noData"])
    return render(
        data,
        img_format="GTiff",
        transform=img.transform,
        crs=img.crs,
        nodata=spec["noData"],
        compress="DEFLATE",
        zlevel=spec["level"],
        predictor=3,
        tiled=True,
        blockxsize=spec["blockSize"],
        blockysize=spec["blockSize"],
    )


def _tile(reader, x, y, spec):
    return reader.tile(x, y, spec["zoom"], expression=spec["expression"], reproject_method=spec["resampling"])


def render_tiles(spec):
    tms = morecantile.tms.get("WebMercatorQuad")
    with Reader(spec["scene"], tms=tms) as warm:
        wx, wy = spec["warmup"]
        _encode(_tile(warm, wx, wy, spec), spec)

    out, per_tile, tile_ms, encode_ms = [], [], [], []
    started = time.perf_counter()
    cpu_started = time.process_time()  # CPU time of the process (every thread): the work, whatever else the core ran
    with Reader(spec["scene"], tms=tms) as reader:
        for t in spec["tiles"]:
            t0 = time.perf_counter()
            img = _tile(reader, t["x"], t["y"], spec)
            t1 = time.perf_counter()
            out.append(_encode(img, spec))
            t2 = time.perf_counter()
            per_tile.append((t2 - t0) * 1000)
            tile_ms.append((t1 - t0) * 1000)
            encode_ms.append((t2 - t1) * 1000)
    elapsed = (time.perf_counter() - started) * 1000
    cpu = (time.process_time() - cpu_started) * 1000

    for t, tif in zip(spec["tiles"], out):  # after the clock: not part of the work
        if t.get("out"):
            with open(t["out"], "wb") as f:
                f.write(tif)
    with Reader(spec["scene"], tms=tms) as reader:
        bounds = reader.get_geographic_bounds(tms.rasterio_geographic_crs)
        tiles = list(tms.tiles(*bounds, zooms=[spec["zoom"]]))
        tile_set = [f"{t.z}-{t.x}-{t.y}" for t in tiles]
        outside = [f"{t.z}-{t.x}-{t.y}" for t in tiles if not reader.tile_exists(t.x, t.y, t.z)]
    return {
        "elapsedMs": elapsed,
        "cpuMs": cpu,
        "tiles": len(out),
        "bytes": [len(b) for b in out],
        "perTileMs": per_tile,
        "tileMs": tile_ms,
        "encodeMs": encode_ms,
        "tileSet": tile_set,
        "outsideFootprint": outside,
        "versions": {
            "rio-tiler": rio_tiler.__version__,
            "rasterio": rasterio.__version__,
            "gdal": rasterio.__gdal_version__,
        },
    }


def _describe(ds):
    return {
        "size": [ds.width, ds.height],
        "count": ds.count,
        "type": ds.dtypes[0],
        "noData": ds.nodata,
        "block": list(ds.block_shapes[0]),
        "compression": ds.compression.name if ds.compression else None,
        "predictor": ds.tags(ns="IMAGE_STRUCTURE").get("PREDICTOR"),
        "crs": ds.crs.to_epsg() if ds.crs else None,
        "transform": list(ds.transform)[:6],
    }


def compare(pair, nodata, tolerance):
    with rasterio.open(pair["reference"]) as r, rasterio.open(pair["candidate"]) as c:
        ref, cand = _describe(r), _describe(c)
        keys = ("size", "count", "type", "noData", "block", "compression", "predictor", "crs")
        layout = [k for k in keys if ref[k] != cand[k]]
        scale = abs(ref["transform"][0]) or 1.0
        if max(abs(a - b) for a, b in zip(ref["transform"], cand["transform"])) > 1e-6 * scale:
            layout.append("transform")
        out = {"name": pair["name"], "reference": ref, "candidate": cand, "layoutDiffers": layout}
        if "size" in layout:  # nothing to compare pixel for pixel (JSON has no infinity: the differences are null)
            out.update(pixels=0, maskMismatches=-1, validBoth=0, identical=0, withinTolerance=0)
            out.update(maxAbsDiff=None, p99AbsDiff=None, meanAbsDiff=None)
            return out
        a = r.read(1).astype(np.float64)
        b = c.read(1).astype(np.float64)
    a_nd = (a == nodata) | np.isnan(a)
    b_nd = (b == nodata) | np.isnan(b)
    valid = ~a_nd & ~b_nd
    diff = np.abs(a[valid] - b[valid])
    out.update(
        pixels=int(a.size),
        maskMismatches=int(np.count_nonzero(a_nd != b_nd)),
        validBoth=int(np.count_nonzero(valid)),
        identical=int(np.count_nonzero(diff == 0)),
        withinTolerance=int(np.count_nonzero(diff <= tolerance)),
        maxAbsDiff=float(diff.max()) if diff.size else 0.0,
        p99AbsDiff=float(np.quantile(diff, 0.99)) if diff.size else 0.0,
        meanAbsDiff=float(diff.mean()) if diff.size else 0.0,
    )
    return out


def main(spec):
    if spec["mode"] == "render":
        return render_tiles(spec)
    if spec["mode"] == "compare":
        return {"pairs": [compare(p, spec["noData"], spec["tolerance"]) for p in spec["pairs"]]}
    raise ValueError(f"unknown mode {spec['mode']!r}: use render or compare")


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
