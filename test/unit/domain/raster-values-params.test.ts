import { describe, expect, it } from 'vitest';
import { InvalidEventError, InvalidParamsError } from '../../../shared/domain/errors.js';
import { type ProcessingParams, sceneKey } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { parseStacItem, resolveStacAssets, withStacScaleOffsets } from '../../../shared/domain/stac-item.js';
import { RESAMPLINGS, tilingParams } from '../../../shared/domain/tiling-params.js';

/**
 * Issue 29's parameters: `unscale` and `scale_offset` (physical values), `output.nodata` as "nan" (the CLI's
 * --dst-nodata), every gdalwarp resampling; and the STAC Item's raster extension as the source of a band's scale
 * and offset. Each is part of the scene key through the canonical parameters (job-key.ts), so each changes it.
 */

const params = (extra: Record<string, unknown>): ProcessingParams => ({ ...DEFAULT_PARAMS, ...extra });
const SOURCE = { bucket: 'b', key: 'scenes/s.tif', versionToken: 'v1' };

describe('tilingParams: unscale, scale_offset, output nodata, resampling', () => {
  it('reads unscale (default off) and per-band scale_offset, and keys each', () => {
    expect(tilingParams(DEFAULT_PARAMS)).toMatchObject({ unscale: false, scaleOffset: {} });
    const on = params({ unscale: true, scale_offset: { B04: { scale: 0.0001, offset: -0.1 } } });
    expect(tilingParams(on)).toMatchObject({ unscale: true, scaleOffset: { B04: { scale: 0.0001, offset: -0.1 } } });
    const keys = new Set([
      sceneKey(SOURCE, DEFAULT_PARAMS, 'c'),
      sceneKey(SOURCE, params({ unscale: true }), 'c'),
      sceneKey(SOURCE, on, 'c'),
      sceneKey(SOURCE, params({ unscale: true, scale_offset: { B04: { scale: 0.0001, offset: 0 } } }), 'c'),
    ]);
    expect(keys.size).toBe(4);
  });

  it('refuses unscale and scale_offset values it would not honour, saying what to write', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ unscale: 'yes' }, /unscale must be true or false/],
      [{ scale_offset: { B04: { scale: 2, offset: 0 } } }, /no effect without unscale/],
      [{ unscale: true, scale_offset: { B05: { scale: 2, offset: 0 } } }, /names band "B05", which bands does not/],
      [{ unscale: true, scale_offset: { B04: { scale: 0, offset: 0 } } }, /scale must be a finite non-zero number/],
      [{ unscale: true, scale_offset: { B04: { scale: 1 } } }, /offset must be a finite number/],
      [{ unscale: true, scale_offset: { B04: { scale: 1, offset: 0, unit: 'm' } } }, /takes only scale and offset/],
      [{ unscale: true, scale_offset: [1] }, /must map band names/],
    ];
    for (const [extra, message] of bad) {
      expect(() => tilingParams(params(extra)), JSON.stringify(extra)).toThrow(InvalidParamsError);
      expect(() => tilingParams(params(extra)), JSON.stringify(extra)).toThrow(message);
    }
  });

  it('takes output.nodata as a finite number or "nan" (JSON has no NaN), and keys it', () => {
    const out = DEFAULT_PARAMS.output as Record<string, unknown>;
    expect(tilingParams(params({ output: { ...out, nodata: 'nan' } })).noData).toBeNaN();
    expect(tilingParams(params({ output: { ...out, nodata: 'NaN' } })).noData).toBeNaN();
    expect(tilingParams(params({ output: { ...out, nodata: 0 } })).noData).toBe(0);
    expect(tilingParams(DEFAULT_PARAMS).noData).toBe(-9999);
    for (const nodata of ['none', '0', Number.POSITIVE_INFINITY, null]) {
      expect(() => tilingParams(params({ output: { ...out, nodata } })), String(nodata)).toThrow(/finite number or "nan"/);
    }
    expect(sceneKey(SOURCE, params({ output: { ...out, nodata: 'nan' } }), 'c')).not.toBe(sceneKey(SOURCE, DEFAULT_PARAMS, 'c'));
  });

  it('accepts every gdalwarp -r method by its gdalwarp name, and nothing else', () => {
    expect(RESAMPLINGS).toEqual([
      'nearest',
      'bilinear',
      'cubic',
      'cubicspline',
      'lanczos',
      'average',
      'rms',
      'mode',
      'max',
      'min',
      'med',
      'q1',
      'q3',
      'sum',
    ]);
    for (const resampling of RESAMPLINGS) expect(tilingParams(params({ resampling })).target.resampling).toBe(resampling);
    // gauss exists for overviews (gdaladdo), not for gdalwarp; near is gdalwarp's short name, Tessera takes the long one.
    for (const resampling of ['gauss', 'near', 'Lanczos'])
      expect(() => tilingParams(params({ resampling }))).toThrow(/use one of nearest, bilinear/);
  });
});

/** A STAC Item with the given assets (hrefs beside it). */
function item(version: '1.0.0' | '1.1.0', assets: Record<string, unknown>) {
  return parseStacItem(
    {
      type: 'Feature',
      stac_version: version,
      id: 'S2B_T31UDQ',
      geometry: null,
      properties: { datetime: '2024-06-01T10:56:29Z' },
      links: [],
      assets,
    },
    'S2/item.json',
  );
}

describe('STAC raster extension scale and offset for --unscale', () => {
  const v10 = item('1.0.0', {
    red: {
      href: './B04.tif',
      'eo:bands': [{ name: 'B04', common_name: 'red' }],
      'raster:bands': [{ scale: 0.0001, offset: -0.1, nodata: 0 }],
    },
    nir: { href: './B08.tif', 'eo:bands': [{ name: 'B08', common_name: 'nir' }], 'raster:bands': [{ nodata: 0 }] },
  });

  it('reads STAC 1.0 raster:bands and STAC 1.1 bands[raster:scale/offset], one default filling the other', () => {
    expect(resolveStacAssets(v10, 'S2/item.json', { B04: 'red', B08: 'nir' })).toEqual({
      B04: { key: 'S2/B04.tif', index: 1, asset: 'red', scaleOffset: { scale: 0.0001, offset: -0.1 } },
      B08: { key: 'S2/B08.tif', index: 1, asset: 'nir' },
    });
    const v11 = item('1.1.0', {
      pair: {
        href: './pair.tif',
        bands: [
          { name: 'B04', 'raster:offset': -0.1 },
          { name: 'B08', 'raster:scale': 0.0001 },
        ],
      },
    });
    expect(resolveStacAssets(v11, 'S2/item.json', { R: 'pair:1', N: 'pair:2' })).toEqual({
      R: { key: 'S2/pair.tif', index: 1, asset: 'pair', scaleOffset: { scale: 1, offset: -0.1 } },
      N: { key: 'S2/pair.tif', index: 2, asset: 'pair', scaleOffset: { scale: 0.0001, offset: 0 } },
    });
  });

  it('puts the item values into scale_offset only with unscale, keeping a band the configuration names', () => {
    const resolved = resolveStacAssets(v10, 'S2/item.json', { B04: 'red', B08: 'nir' });
    const base = params({ bands: { B04: 1, B08: 1 } });
    // Without unscale nothing changes: existing STAC scenes keep their keys.
    expect(withStacScaleOffsets(base, resolved, 'S2/item.json')).toBe(base);
    const unscaled = withStacScaleOffsets({ ...base, unscale: true }, resolved, 'S2/item.json');
    expect(unscaled.scale_offset).toEqual({ B04: { scale: 0.0001, offset: -0.1 } });
    expect(tilingParams(unscaled).scaleOffset).toEqual({ B04: { scale: 0.0001, offset: -0.1 } });
    const own = withStacScaleOffsets({ ...base, unscale: true, scale_offset: { B04: { scale: 2, offset: 1 } } }, resolved, 'S2/item.json');
    expect(own.scale_offset).toEqual({ B04: { scale: 2, offset: 1 } });
  });

  it('refuses to unscale a band whose raster:bands scale is not a number, and leaves scenes without unscale alone', () => {
    const broken = item('1.0.0', { red: { href: './B04.tif', 'raster:bands': [{ scale: '0.0001', offset: -0.1 }] } });
    const resolved = resolveStacAssets(broken, 'S2/item.json', { B04: 'red' });
    const base = params({ bands: { B04: 1 }, expression: 'B04' });
    expect(withStacScaleOffsets(base, resolved, 'S2/item.json')).toBe(base);
    expect(() => withStacScaleOffsets({ ...base, unscale: true }, resolved, 'S2/item.json')).toThrow(InvalidEventError);
    expect(() => withStacScaleOffsets({ ...base, unscale: true }, resolved, 'S2/item.json')).toThrow(
      /raster:bands\[0\]\.scale "0.0001" is not a finite non-zero number.*params\.scale_offset/,
    );
  });
});
