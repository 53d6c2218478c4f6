"""rio-tiler (the library behind TiTiler) rendering a scene's PNG pyramid, one warm process per core.

The rio-tiler baseline of bench/sections/pyramid.ts. What a TiTiler deployment does per tile request, in a loop
over every tile of the zoom range and without the HTTP server: N worker processes (multiprocessing, fork), each
opening the scene once with rio_tiler.io.Reader (the warm part: the dataset and GDAL's block cache stay open for
every tile it renders), then for each tile of its share Reader.tile(x, y, z, expression=...) (a WarpedVRT of the
source onto the tile, nearest, the source's nodata masked), ImageData.rescale to 0-255 and ImageData.render as
PNG with the colormap Tessera uses (its 256 entries as a rio-tiler colormap dict), written to outDir/z/x/y.png.
A tile that rio-tiler finds outside the scene (TileOutsideBounds) is rendered fully transparent, as the others write it.

The tile set is rio-tiler's own: morecantile's tiles over the scene's geographic bounds, zooms minZoom to maxZoom,
as a TileJSON-driven client would request them; the section compares it with Tessera's and gdal2tiles'.

Input: one JSON argument {scene, outDir, processes, minZoom, maxZoom, expression, rescale: [min, max],
colormapHex}; output: one JSON line {tiles, perZoom, outsideFootprint, renderMs, elapsedMs, versions}. renderMs is the warm part
only: from the pool's start (forking the workers and opening the scene included) to the last tile written, without
the interpreter's start and imports.
"""
import json
import multiprocessing as mp
import os
import sys
import time
import warnings

import morecantile
import numpy as np
import rasterio
import rio_tiler
from rio_tiler.errors import NoOverviewWarning, TileOutsideBounds
from rio_tiler.io import Reader
from rio_tiler.models import ImageData

# The synthetic scene has no internal overviews (neither has a band file as published); rio-tiler warns once per open.
warnings.filterwarnings("ignore", category=NoOverviewWarning)

_state = {}


def _open(spec):
    lut = np.frombuffer(bytes.fromhex(spec["colormapHex"]), dtype=np.uint8).reshape(256, 3)
    _state.update(
        spec=spec,
        reader=Reader(spec["scene"]),
        colormap={i: (int(r), int(g), int(b), 255) for i, (r, g, b) in enumerate(lut)},
    )


def _tile(t):
    s = _state
    spec = s["spec"]
    x, y, z = t
    try:
        img = s["reader"].tile(x, y, z, expression=spec["expression"])
        outside = False
    except TileOutsideBounds:
        # A tile of the footprint's bounding box that misses the footprint itself (a corner of a scene whose grid
        # is not the tile matrix set's): TiTiler answers 404; Tessera and gdal2tiles write it, transparent. So
        # does this loop, through the same render, for the same tile set.
        img = ImageData(np.ma.MaskedArray(np.zeros((1, 256, 256), dtype=np.float64), mask=True))
        outside = True
    img = img.rescale(in_range=(tuple(spec["rescale"]),))
    png = img.render(img_format="PNG", colormap=s["colormap"])
    folder = os.path.join(spec["outDir"], str(z), str(x))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{y}.png"), "wb") as f:
        f.write(png)
    return z, outside


def main(spec):
    started = time.perf_counter()
    tms = morecantile.tms.get("WebMercatorQuad")
    with Reader(spec["scene"], tms=tms) as reader:
        bounds = reader.get_geographic_bounds(tms.rasterio_geographic_crs)
    zooms = list(range(spec["minZoom"], spec["maxZoom"] + 1))
    tiles = [(t.x, t.y, t.z) for t in tms.tiles(*bounds, zooms=zooms)]
    per_zoom = {str(z): 0 for z in zooms}
    outside = 0
    render_started = time.perf_counter()
    with mp.get_context("fork").Pool(spec["processes"], initializer=_open, initargs=(spec,)) as pool:
        for z, out in pool.imap_unordered(_tile, tiles, chunksize=1):
            per_zoom[str(z)] += 1
            outside += out
    done = time.perf_counter()
    return {
        "tiles": sum(per_zoom.values()),
        "perZoom": per_zoom,
        "outsideFootprint": outside,
        "renderMs": (done - render_started) * 1000,
        "elapsedMs": (done - started) * 1000,
        "versions": {"rio-tiler": rio_tiler.__version__, "rasterio": rasterio.__version__, "gdal": rasterio.__gdal_version__},
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
