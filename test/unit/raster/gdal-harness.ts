import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The package's Node entry is CommonJS (`gdal3.js/node`); its browser build fails in Node.
// The types come from the package's own declaration of 'gdal3.js'.
const initGdalJs = createRequire(import.meta.url)('gdal3.js/node.js') as typeof import('gdal3.js').default;

/**
 * GDAL 3.8 (gdal3.js, WebAssembly) as the independent verifier of what
 * shared/raster/ writes and the producer of layouts it must read.
 *
 * gdal3.js loads its .wasm/.data with paths relative to the working
 * directory, so `path` must be relative: tests run from the repository root.
 * In Node it mounts the directory of each opened file at /input.
 */
type Gdal = Awaited<ReturnType<typeof initGdalJs>>;
type Dataset = Awaited<ReturnType<Gdal['open']>>['datasets'][number];

let gdal: Promise<Gdal> | undefined;

export function loadGdal(): Promise<Gdal> {
  gdal ??= initGdalJs({
    path: 'node_modules/gdal3.js/dist/package',
    useWorker: false,
    // Keep expected failures (opening a bad file on purpose) out of the test output.
    logHandler: () => {},
    errorHandler: () => {},
  });
  return gdal;
}

/** A scratch directory removed by the returned function. */
export function scratchDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-raster-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Runs `use` with the file opened by GDAL, closing it afterwards. Throws GDAL's message when it cannot open it. */
export async function withDataset<T>(path: string, use: (g: Gdal, ds: Dataset) => Promise<T>): Promise<T> {
  const g = await loadGdal();
  const opened = await g.open(path);
  const ds = opened.datasets[0];
  if (!ds) throw new Error(`GDAL could not open ${path}: ${JSON.stringify(opened.errors)}`);
  try {
    return await use(g, ds);
  } finally {
    await g.close(ds);
  }
}

/** The subset of `gdalinfo -json` the tests look at. */
export interface GdalInfo {
  size: [number, number];
  geoTransform: number[];
  coordinateSystem?: { wkt: string };
  metadata: Record<string, Record<string, string>>;
  bands: {
    band: number;
    block: [number, number];
    type: string;
    description?: string;
    noDataValue?: number | string;
    overviews?: { size: [number, number] }[];
  }[];
}

export function gdalInfo(path: string): Promise<GdalInfo> {
  return withDataset(path, async (g, ds) => (await g.gdalinfo(ds, ['-mdd', 'all'])) as GdalInfo);
}

/** The EPSG code at the root of GDAL's WKT2 (`ID["EPSG",32631]]` at its end). */
export function rootEpsg(info: GdalInfo): number | undefined {
  const m = /ID\["EPSG",(\d+)\]\]\s*$/.exec(info.coordinateSystem?.wkt ?? '');
  return m ? Number(m[1]) : undefined;
}

/**
 * The pixels of one band in a window as GDAL reads them, converted to float64
 * by GDAL itself (gdal_translate to raw ENVI), so no Tessera code is involved.
 */
export async function gdalReadWindow(
  path: string,
  band: number,
  win: { x: number; y: number; width: number; height: number },
): Promise<Float64Array> {
  return withDataset(path, async (g, ds) => {
    const out = await g.gdal_translate(
      ds,
      ['-of', 'ENVI', '-ot', 'Float64', '-b', String(band), '-srcwin', String(win.x), String(win.y), String(win.width), String(win.height)],
      `read-${band}-${win.x}-${win.y}`,
    );
    const bytes = await g.getFileBytes(out);
    return new Float64Array(bytes.slice().buffer, 0, win.width * win.height);
  });
}

/**
 * A file made by GDAL from known band arrays: they are written as raw ENVI
 * (a format with no TIFF code at all), then `gdal_translate -of <format>`
 * with the options under test (georeferencing included, e.g. `-a_srs`).
 */
export async function gdalGeoTiff(
  dir: string,
  name: string,
  bands: readonly (Uint8Array | Uint16Array | Int16Array | Float32Array | Float64Array | Int32Array | Uint32Array)[],
  width: number,
  height: number,
  options: readonly string[],
  format: 'GTiff' | 'COG' | 'PNG' = 'GTiff',
): Promise<Uint8Array> {
  const first = bands[0];
  if (!first) throw new Error('gdalGeoTiff needs a band');
  const enviType = new Map<unknown, number>([
    [Uint8Array, 1],
    [Int16Array, 2],
    [Int32Array, 3],
    [Float32Array, 4],
    [Float64Array, 5],
    [Uint16Array, 12],
    [Uint32Array, 13],
  ]).get(first.constructor);
  if (enviType === undefined) throw new Error('unsupported band type');
  const raw = Buffer.concat(bands.map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength)));
  writeFileSync(join(dir, `${name}.bil`), raw);
  writeFileSync(
    join(dir, `${name}.hdr`),
    `ENVI\nsamples = ${width}\nlines = ${height}\nbands = ${bands.length}\nheader offset = 0\nfile type = ENVI Standard\n` +
      `data type = ${enviType}\ninterleave = bsq\nbyte order = 0\n`,
  );
  return withDataset(join(dir, `${name}.bil`), async (g, ds) => {
    const out = await g.gdal_translate(ds, ['-of', format, ...options], `${name}-gdal`);
    return g.getFileBytes(out);
  });
}
