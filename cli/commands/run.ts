import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { type MainJobSummary, runMainJob, type TileProfile } from '../../functions/local/main-job.js';
import { parseAssetSpecs, parseBandSpecs } from '../../functions/local/scene-input.js';
import { defaultWorkers } from '../../functions/local/worker-process.js';
import { parsePostgresUrl } from '../../functions/postgres/connection.js';
import { checkZooms } from '../../shared/app/pyramid-grid.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { DEFAULT_PARAMS, ENV } from '../../shared/domain/runtime-config.js';
import { tilingParams, zoomRangeParams } from '../../shared/domain/tiling-params.js';
import { canonicalCrsText } from '../../shared/raster/crs.js';
import type { CliIo } from '../io.js';
import { terminalProgress } from '../terminal-progress.js';
import { DEFAULT_DIR, intOption, numberOption, outputProfileOption, renderOutputOption } from './options.js';

export const runHelp = `tessera run: the main job on the local backend

Generates (or takes) a multi-band scene, fans it out to tile jobs, runs them on
worker processes, writes NDVI Cloud Optimized GeoTIFF tiles create-only,
assembles a VRT mosaic and prints a summary. Nothing is injected unless asked:
--demo adds the cloud's at-least-once hazards (npm start passes it).

Scene (default: a synthetic 2-band B04/B08 scene, EPSG:32631, bands B04=1 B08=2):
  --scene PATH        a GeoTIFF to process (any layout GDAL writes: docs/geotiff.md)
  --source-key KEY    tile an object already in the source store, e.g. the key \`tessera ingest\` published
  --band NAME=INDEX   name band INDEX (1-based) of the scene file, e.g. --band B04=1 --band B08=2
  --band NAME=PATH[:INDEX]
                      take band NAME from its own file (band 1, or INDEX): several files make a
                      multi-file scene, each band pinned to its own version (repeat per band)
  --stac ITEM         a STAC Item (a local .json, or a key in the source store): the scene is its
                      assets, hrefs relative to the Item (docs/stac.md)
  --asset NAME=ASSET  the Item's asset (or eo:bands common name, e.g. red, nir) for band NAME
  --expression EXPR   the band math over the band names (default '(B08 - B04) / (B08 + B04)', NDVI)
  --unscale           apply each band's scale and offset before the band math (value * scale + offset,
                      as gdal_translate -unscale): from the STAC Item's raster:bands where --stac gives
                      them, else from the file's GDAL metadata (-a_scale/-a_offset); e.g. Sentinel-2 L2A
                      since baseline 04.00 (DN offset -1000, reflectance = DN * 0.0001 - 0.1)
  --dst-nodata V      the tiles' nodata value: a number or nan (default -9999); a valid result equal
                      to it is written as the next float32 above it, never as nodata

Target grid (default: the scene's own grid; with several band files, the finest band's):
  --crs CRS           reproject onto this CRS: EPSG:N (any EPSG code, offline), WKT (1 or 2), PROJJSON,
                      a PROJ string ('+proj=laea +lat_0=52 +lon_0=10 +ellps=GRS80'), or a file holding
                      one; a CRS without an EPSG code is keyed by its canonical PROJ string
                      (docs/reprojection.md)
  --resampling R      any gdalwarp -r method (default nearest, as gdalwarp): nearest, bilinear, cubic,
                      cubicspline, lanczos; average, rms, mode, max, min, med, q1, q3, sum (over each
                      target pixel's footprint); nodata pixels are skipped by all of them
                      (docs/reprojection.md)
  --tms ID            cut the tiles of a tile matrix set: WebMercatorQuad, WorldCRS84Quad,
                      UTMnnWGS84Quad (nn 01-60); keys tiles/<scene>/<tms>/<z>/<x>/<y>.tif
  --zoom Z|MIN-MAX    the zoom level of --tms (with --tile 256, or 512 for 512-pixel tiles), or a range
                      (e.g. 8-14): a pyramid, every tile of every zoom its own job; the highest zoom's
                      tiles are read from the scene, each lower one is built from its four children
                      once they are written; the mosaic and the STAC Item are of the highest zoom
                      (docs/pyramids.md)
  --mosaic KIND       vrt (default: a VRT over the tiles), cog (also one COG mosaic) or pmtiles
                      (also one PMTiles archive of every zoom: rendered tiles on WebMercatorQuad);
                      a STAC Item of the output is written beside the mosaic either way, and a
                      rendered scene gets a quicklook PNG (and on WebMercatorQuad a TileJSON)

Rendered tiles for web maps (default: float32 COG tiles for analysis; docs/web-maps.md):
  --format F          cog (default), png, webp or jpeg: png/webp/jpeg tiles are 8-bit images of the band
                      math, keyed tiles/<scene>/...<.png|.webp|.jpg>; part of every job key
  --rescale MIN,MAX   the values mapped onto the 256 levels (required for png, webp, jpeg: the band
                      math is float32), e.g. --rescale=-1,1 for NDVI (with = when MIN is negative);
                      values outside the range take the end levels
  --colormap NAME     colour the levels: viridis, plasma, magma, inferno (matplotlib, CC0), rdylgn
                      (ColorBrewer RdYlGn, red to green: NDVI), greys (ColorBrewer); none: grey
                      nodata, masked and outside-the-source pixels are transparent in png and webp
  --background R,G,B  jpeg only, and required there: the colour those pixels get (jpeg has no
                      transparency; without it they would be black), e.g. 255,255,255

Run:
  --size N            synthetic scene width and height in pixels (default 5120)
  --tile N            tile size in pixels (default 256: 400 windows at 5120)
                      every scene, band, grid and output option is part of the job key
  --compression C     tile compression: deflate, zstd or none (default: the output profile of
                      DEFAULT_PARAMS, shared/domain/runtime-config.ts); part of every job key
  --level N           its level: deflate 1-9, zstd 1-22 (default: the profile's, deflate 9; a
                      codec named alone takes its own, deflate 6 or zstd 9, as GDAL's)
  --workers N         worker processes, each with its own SQLite connections, pulling from the
                      queue (default: the cores this process may use, os.availableParallelism(): %CORES%
                      here); a worker killed mid-job (even kill -9) is survived by the others
  --seed N            seed for the synthetic scene and the duplicate choice (default 42)
  --dir PATH          backend directory (default .tessera)
  --fresh             forget the previous run first: claims, queue, outputs (npm start does this;
                      generated scenes under sources/ are kept)
  --profile           measure one tile job: print its seconds and peak memory, and the \`tessera choose\`
                      flags they give (defaults to 1 worker, no duplicates and no stalled worker, so the
                      tiles run one at a time; the memory is the process's peak, runtime included)
  --sink URL          also write one feature row per tile (NDVI count/mean/min/max, footprint in the
                      scene CRS and EPSG:4326) into PostGIS: postgis://user:password@host:5432/db
                      (table tile_features, created if absent; one row per tile whatever the retries:
                      docs/postgis.md). Workers get it as TESSERA_FEATURE_SINK
  --json              print the summary as one JSON object on the last line
  --view              then serve the scene's web map on 127.0.0.1 (tessera view: prints the URL, opens
                      $BROWSER when set) until Ctrl-C; with --json, its {url, ...} line follows the summary
  --verbose           print the structured logs (JSON lines) on stderr

Demonstration (off by default: a plain run injects no fault):
  --demo              inject the at-least-once hazards of the clouds: 10% of the jobs delivered twice
                      and one worker that stalls past its lease (another takes the lapsed lease over;
                      the stalled one's write is refused and its commit fails LeaseStolen, logged ERROR)
  --demo-duplicates R fraction of jobs delivered twice, 0 to 1 (default 0.1 with --demo); alone, it
                      injects the duplicates only
  --demo-stall        inject the stalled worker; alone, it injects the stall only

Exit status: 0 when the mosaic holds exactly grid-count tiles, 1 otherwise.`.replace('%CORES%', String(defaultWorkers()));

export async function runCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      scene: { type: 'string' },
      'source-key': { type: 'string' },
      band: { type: 'string', multiple: true },
      stac: { type: 'string' },
      asset: { type: 'string', multiple: true },
      expression: { type: 'string' },
      unscale: { type: 'boolean', default: false },
      'dst-nodata': { type: 'string' },
      crs: { type: 'string' },
      resampling: { type: 'string' },
      tms: { type: 'string' },
      zoom: { type: 'string' },
      mosaic: { type: 'string' },
      format: { type: 'string' },
      rescale: { type: 'string' },
      colormap: { type: 'string' },
      background: { type: 'string' },
      size: { type: 'string' },
      tile: { type: 'string' },
      compression: { type: 'string' },
      level: { type: 'string' },
      workers: { type: 'string' },
      demo: { type: 'boolean', default: false },
      'demo-duplicates': { type: 'string' },
      'demo-stall': { type: 'boolean', default: false },
      seed: { type: 'string' },
      dir: { type: 'string', default: DEFAULT_DIR },
      fresh: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      view: { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      sink: { type: 'string' },
    },
  });
  if (values.sink !== undefined) {
    // Checked here, so a typo fails before any tile runs; the workers (child processes) inherit the variable.
    parsePostgresUrl(values.sink);
    process.env[ENV.featureSink] = values.sink;
  }
  // Profiling measures tiles one at a time: no parallel workers sharing the CPU, no injected hazards.
  const profile = values.profile;
  const size = intOption('size', values.size, 5120, 16, 65_536);
  const tilePx = intOption('tile', values.tile, 256, 16, 8192);
  const output = renderOutputOption(withDstNoData(outputProfileOption(values.compression, values.level), values['dst-nodata']), {
    format: values.format,
    rescale: values.rescale,
    colormap: values.colormap,
    background: values.background,
    cogProfile: values.compression !== undefined || values.level !== undefined,
  });
  if (values.asset !== undefined && values.stac === undefined)
    throw new InvalidParamsError('--asset names an asset of --stac ITEM: give --stac too');
  if ((values.tms === undefined) !== (values.zoom === undefined)) throw new InvalidParamsError('--tms and --zoom go together');
  const grid: Record<string, unknown> = {
    ...(values.expression === undefined ? {} : { expression: values.expression }),
    ...(values.crs === undefined ? {} : { dst_crs: crsOption(io.cwd, values.crs) }),
    ...(values.resampling === undefined ? {} : { resampling: values.resampling }),
    ...(values.tms === undefined ? {} : { tms: values.tms, ...zoomRangeParams(values.zoom as string) }),
    ...(values.mosaic === undefined ? {} : { mosaic: values.mosaic }),
    ...(values.unscale ? { unscale: true } : {}),
  };
  const custom = output !== undefined || Object.keys(grid).length > 0;
  const params = custom ? { ...DEFAULT_PARAMS, tile_px: tilePx, ...(output === undefined ? {} : { output }), ...grid } : undefined;
  // Checked before anything is staged: a typo in --crs or --tms fails at once, not after an import.
  if (params !== undefined) checkZooms(tilingParams(params));
  const summary = await runMainJob({
    dir: resolve(io.cwd, values.dir),
    scene: values.scene === undefined ? undefined : resolve(io.cwd, values.scene),
    sourceKey: values['source-key'],
    width: size,
    height: size,
    tilePx,
    params,
    bandSpecs: parseBandSpecs(values.band, io.cwd),
    stac: values.stac === undefined ? undefined : { item: resolveStac(io.cwd, values.stac), assets: parseAssetSpecs(values.asset) },
    workers: intOption('workers', values.workers, profile ? 1 : defaultWorkers(), 1, 64),
    ...demoFaults(values),
    profile,
    seed: intOption('seed', values.seed, 42, 0, 2 ** 31),
    fresh: values.fresh,
    progress: terminalProgress(process.stderr),
    log: values.verbose ? (line) => io.stderr(`${line}\n`) : () => {},
  });
  io.stdout(values.json ? `${JSON.stringify(summary)}\n` : formatSummary(summary) + formatProfile(summary.profile));
  if (values.view && summary.ok) {
    // Loaded only when asked: the viewer's server and bundle are no part of a plain run.
    const { serveView } = await import('./view.js');
    const { sceneViewFromDir } = await import('../view/scene-view.js');
    await serveView(await sceneViewFromDir(resolve(io.cwd, values.dir), summary.sceneKey), { port: 0, json: values.json, io });
  } else if (values.view) {
    io.stderr('tessera run: --view skipped: the scene is incomplete (manifest count and grid count differ), so it has no mosaic to show\n');
  }
  return summary.ok ? 0 : 1;
}

/**
 * The faults `--demo` and its knobs inject: none without them. `--profile` measures tiles one at a time on a quiet
 * machine, so it takes none.
 */
function demoFaults(values: { demo: boolean; 'demo-duplicates'?: string | undefined; 'demo-stall': boolean; profile: boolean }) {
  const asked = values.demo || values['demo-duplicates'] !== undefined || values['demo-stall'];
  if (asked && values.profile)
    throw new InvalidParamsError(
      '--profile measures tiles one at a time with no fault injected: drop --demo, --demo-duplicates and --demo-stall',
    );
  return {
    duplicateRate: numberOption('demo-duplicates', values['demo-duplicates'], values.demo ? 0.1 : 0, 0, 1),
    injectSteal: values.demo || values['demo-stall'],
  };
}

/**
 * `--dst-nodata V`: the output profile with `output.nodata` set (a number, or "nan": JSON has no NaN), so it is
 * part of every job key as the rest of the profile is.
 */
function withDstNoData(output: Readonly<Record<string, unknown>> | undefined, raw: string | undefined) {
  if (raw === undefined) return output;
  const text = raw.trim().toLowerCase();
  const value = text === 'nan' ? 'nan' : Number(text);
  if (value !== 'nan' && (text === '' || !Number.isFinite(value)))
    throw new InvalidParamsError(`--dst-nodata must be a number or nan, got ${JSON.stringify(raw)}`);
  const withNoData = { ...(output ?? (DEFAULT_PARAMS.output as Readonly<Record<string, unknown>>)), nodata: value };
  tilingParams({ ...DEFAULT_PARAMS, output: withNoData });
  return withNoData;
}

/**
 * `--crs`: EPSG:N, WKT, PROJJSON, a PROJ string, or a file holding one (as gdalwarp's -t_srs takes them), written in the
 * canonical form the job key holds (EPSG:N, or the canonical PROJ string of a CRS without a code).
 */
function crsOption(cwd: string, raw: string): string {
  const text = raw.trim();
  const looksLikeCrs = /^(?:EPSG:|\+|proj=|\{|[A-Za-z_]+\s*[[(])/i.test(text);
  const path = resolve(cwd, text);
  return canonicalCrsText(!looksLikeCrs && existsSync(path) ? readFileSync(path, 'utf8') : text);
}

/** A local Item path is resolved against the working directory; anything else is a source-store key. */
function resolveStac(cwd: string, item: string): string {
  const path = resolve(cwd, item);
  return existsSync(path) ? path : item;
}

/** The profile, and the `tessera choose` flags it gives (whole seconds and MB, rounded up). */
export function formatProfile(p: TileProfile | undefined): string {
  if (p === undefined) return '';
  const runtime = Math.max(1, Math.ceil(p.secondsPerTile));
  return (
    `\nprofile: ${p.secondsPerTile.toFixed(2)} s per tile (${p.tiles} tiles, ${p.workers} worker${p.workers === 1 ? '' : 's'}, ` +
    `tile phase ${(p.tilePhaseMs / 1000).toFixed(1)} s), peak memory ${p.peakMemoryMb} MB\n` +
    `for tessera choose: --runtime ${runtime}s --memory ${p.peakMemoryMb}MB (measured on this machine; a cloud vCPU may be slower)\n`
  );
}

export function formatSummary(s: MainJobSummary): string {
  const rows: [string, string | number][] = [
    ['scene', s.source],
    ...(s.bands === undefined ? [] : Object.entries(s.bands).map(([band, key]) => [`  band ${band}`, key] as [string, string])),
    ['scene key', s.sceneKey],
    ['windows (grid count)', s.windows],
    ['tiles written', s.tilesWritten],
    ['duplicate deliveries injected', s.duplicatesDelivered],
    ['duplicates stopped at the claim', s.duplicatesStoppedAtClaim],
    ['duplicates stopped at the write', s.duplicatesStoppedAtWrite],
    ['leases taken over after lapsing', s.leasesTakenOver],
    ['leases stolen (commit refused, ERROR)', s.leasesStolen],
    ['dead-lettered', s.poison],
    [
      'grid',
      `${s.crs}${s.tms === undefined ? '' : s.minZoom === undefined ? `, ${s.tms} zoom ${s.zoom}` : `, ${s.tms} zooms ${s.minZoom}-${s.zoom} (${s.pyramidTiles} tiles; the mosaic is zoom ${s.zoom})`}`,
    ],
    ['manifest count / grid count', `${s.manifestCount} / ${s.gridCount}${s.ok ? '  OK' : '  MISMATCH'}`],
    ['mosaic', s.mosaicPath || '(not assembled)'],
    ...(s.cogMosaicPath === undefined ? [] : ([['COG mosaic', s.cogMosaicPath]] as [string, string][])),
    ...(s.pmtilesPath === undefined ? [] : ([['PMTiles archive', s.pmtilesPath]] as [string, string][])),
    ...(s.tileJsonPath === undefined ? [] : ([['TileJSON', s.tileJsonPath]] as [string, string][])),
    ...(s.quicklookPath === undefined ? [] : ([['quicklook', s.quicklookPath]] as [string, string][])),
    ['STAC item', s.stacItemPath || '(not written)'],
    ['outputs', s.outputDir],
    ['elapsed', `${(s.elapsedMs / 1000).toFixed(1)} s`],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  return `${rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n')}\n`;
}
