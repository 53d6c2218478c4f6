import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/**
 * The soak oracle's check of the render itself. The reference render shares `renderTile` with the workers,
 * so a render bug (a band read from the wrong index, a wrong resampling kernel, a geotransform off by a
 * pixel) makes the same bytes on both sides and passes the byte-for-byte oracle. A sample of the reference
 * tiles is therefore compared with GDAL's own render of the same window, exactly as the GDAL comparison
 * tests do it (test/support/gdal-warp-compare.py: gdalwarp of each band onto the tile's grid, then the band
 * math in numpy), with their thresholds (test/e2e/reproject-gdal.test.ts).
 */

const here = dirname(fileURLToPath(import.meta.url));
const COMPARE = resolve(here, '..', 'support', 'gdal-warp-compare.py');
const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const run = promisify(execFile);

/** One reference tile and what GDAL needs to render its window itself. */
export interface GdalSample {
  /** `S12/1_0`: the scene version's label and the window. */
  readonly label: string;
  /** The reference render's bytes of the tile, on disk. */
  readonly tilePath: string;
  /** `NAME=PATH:INDEX` for every band the expression reads: the exact source bytes the soak staged. */
  readonly bands: readonly string[];
  readonly expression: string;
  readonly resampling: string;
  /** The scene's target grid, when the tile is a window of one (the tile is compared with the whole grid's warp there). */
  readonly wholeGrid?: { readonly geoTransform: readonly number[]; readonly width: number; readonly height: number } | undefined;
}

/** What gdal-warp-compare.py prints (the fields the thresholds read). */
interface Agreement {
  readonly pixels: number;
  readonly validBoth: number;
  readonly identical: number;
  readonly withinTolerancePct: number | null;
  readonly maskAgreePct: number | null;
  readonly maxAbsDiff: number | null;
  readonly validOnlyOurs: number;
  readonly validOnlyGdal: number;
}

/** The resampling methods whose result is one of the source's values: identical to gdalwarp's, as nearest. */
const PICKS_A_VALUE = new Set(['nearest', 'mode', 'max', 'min', 'med', 'q1', 'q3']);

export interface GdalVerdict {
  readonly label: string;
  /** Within the GDAL tests' thresholds. */
  readonly agrees: boolean;
  /** The figures, one line: what the report prints for every sampled tile. */
  readonly line: string;
}

/**
 * Compare one reference tile with GDAL's render of its window. Thresholds, the GDAL comparison tests':
 * a value-picking method (nearest, ...) identical on every pixel valid in both; the others at least 99 %
 * of those within 1e-3; the nodata masks agreeing on at least 99.5 % of the pixels; and not vacuous, more
 * than 30 % of the tile valid in both.
 */
export async function compareWithGdal(sample: GdalSample): Promise<GdalVerdict> {
  const args = [COMPARE, '--mosaic', sample.tilePath, '--expression', sample.expression, '--resampling', sample.resampling];
  for (const b of sample.bands) args.push('--band', b);
  if (sample.wholeGrid !== undefined) args.push('--whole-grid', JSON.stringify(sample.wholeGrid));
  let a: Agreement;
  try {
    const { stdout } = await run(PYTHON, args, { encoding: 'utf8', maxBuffer: 4 * 1024 * 1024 });
    a = JSON.parse(stdout) as Agreement;
  } catch (error) {
    const e = error as { stderr?: string; message?: string };
    return { label: sample.label, agrees: false, line: `GDAL comparison did not run: ${(e.stderr || e.message || String(error)).trim()}` };
  }
  const exact = PICKS_A_VALUE.has(sample.resampling);
  const problems: string[] = [];
  if (!(a.validBoth > 0.3 * a.pixels)) problems.push(`only ${a.validBoth} of ${a.pixels} pixels valid in both (a vacuous comparison)`);
  if (exact && a.identical !== a.validBoth) problems.push(`${a.validBoth - a.identical} pixels differ (nearest must be identical)`);
  if (!exact && !((a.withinTolerancePct ?? 0) >= 99)) problems.push(`only ${pct(a.withinTolerancePct)} within 1e-3 (at least 99 %)`);
  if (!((a.maskAgreePct ?? 0) >= 99.5)) problems.push(`masks agree on ${pct(a.maskAgreePct)} (at least 99.5 %)`);
  const figures =
    `${sample.resampling}${sample.wholeGrid ? ' on a target grid' : ''}: ${a.validBoth}/${a.pixels} valid in both ` +
    `(${a.validOnlyOurs} only ours, ${a.validOnlyGdal} only GDAL's), identical ${a.identical}, ` +
    `within 1e-3 ${pct(a.withinTolerancePct)}, max |diff| ${a.maxAbsDiff === null ? '-' : a.maxAbsDiff.toPrecision(3)}, masks agree ${pct(a.maskAgreePct)}`;
  return {
    label: sample.label,
    agrees: problems.length === 0,
    line: problems.length === 0 ? figures : `${problems.join('; ')} [${figures}]`,
  };
}

const pct = (x: number | null): string => (x === null ? '-' : `${x.toFixed(3)} %`);
