import { describe, expect, it } from 'vitest';
import { parseStackConfig, StackConfigError } from '../../../infra/common/config.js';
import { makeTileJob, parseTileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { outputKeys, sceneKey } from '../../../shared/domain/job-key.js';
import { COLORMAP_NAMES, outputForFormat, TILE_FORMATS, tileContentType, tileFormatOf } from '../../../shared/domain/render-params.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { tileGrid, windowAt } from '../../../shared/domain/tile-grid.js';
import { tilingParams } from '../../../shared/domain/tiling-params.js';

const cog = DEFAULT_PARAMS.output as Record<string, unknown>;
const png = (extra: Record<string, unknown> = {}) => ({
  ...DEFAULT_PARAMS,
  output: { ...outputForFormat(cog, { format: 'PNG', rescale: [-1, 1], colormap: 'rdylgn' }), ...extra },
});
/** The message of the InvalidParamsError tilingParams throws for these parameters. */
function refusal(params: Record<string, unknown>): string {
  try {
    tilingParams({ ...DEFAULT_PARAMS, ...params });
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidParamsError);
    return (e as Error).message;
  }
  throw new Error('the parameters were accepted');
}

describe('rendered tile parameters (shared/domain/render-params.ts, tilingParams)', () => {
  it('reads PNG with rescale and a colormap, and keeps COG the default with no render settings', () => {
    expect(tilingParams(png())).toMatchObject({ format: 'PNG', render: { format: 'PNG', rescale: [-1, 1], colormap: 'rdylgn' } });
    expect(tilingParams(DEFAULT_PARAMS)).toMatchObject({ format: 'COG', render: undefined });
    // A rendered output keeps nodata (it decides which pixels are transparent) and drops the COG codec settings.
    expect(png().output).toEqual({ format: 'PNG', nodata: -9999, rescale: [-1, 1], colormap: 'rdylgn' });
  });

  it('refuses an unknown colormap, naming every known one', () => {
    const message = refusal({ output: { ...png().output, colormap: 'jet' } });
    expect(message).toContain('"jet" is not a known colormap');
    for (const name of COLORMAP_NAMES) expect(message).toContain(name);
  });

  it('refuses a rescale whose min is not below its max, or that is not two numbers', () => {
    expect(refusal({ output: { ...png().output, rescale: [1, 1] } })).toContain('min 1 must be less than max 1');
    expect(refusal({ output: { ...png().output, rescale: [1, -1] } })).toContain('swap them');
    expect(refusal({ output: { ...png().output, rescale: [0, 'x'] } })).toContain('must be [min, max], two finite numbers');
  });

  it.each(['PNG', 'WEBP', 'JPEG'])('refuses %s of the float32 band math without a rescale, naming --rescale', (format) => {
    const output = { format, nodata: -9999, ...(format === 'JPEG' ? { background: [255, 255, 255] } : {}) };
    expect(refusal({ output })).toMatch(/float32 band, to 8-bit pixels.*--rescale MIN,MAX/);
  });

  it('refuses JPEG without a background colour (the black border of JPEG map tiles), naming PNG, WebP and --background', () => {
    const message = refusal({ output: { format: 'JPEG', nodata: -9999, rescale: [-1, 1] } });
    expect(message).toContain('JPEG has no transparency');
    expect(message).toContain('--format png|webp');
    expect(message).toContain('--background R,G,B');
    expect(tilingParams({ ...DEFAULT_PARAMS, output: { format: 'JPEG', rescale: [-1, 1], background: [255, 255, 255] } }).render).toEqual({
      format: 'JPEG',
      rescale: [-1, 1],
      background: [255, 255, 255],
    });
  });

  it('refuses settings the chosen writer would ignore: a colormap on a COG, a codec on a PNG, a background on a PNG, a COG mosaic of PNG tiles', () => {
    expect(refusal({ output: { ...cog, colormap: 'viridis' } })).toContain('output.colormap applies to rendered tiles only');
    expect(refusal({ output: { ...png().output, compression: 'ZSTD' } })).toContain('output.compression is a setting of COG tiles');
    expect(refusal({ output: { ...png().output, background: [0, 0, 0] } })).toContain('output.background is for JPEG tiles');
    expect(refusal({ ...png(), mosaic: 'cog' })).toContain('mosaic "cog" is built from COG tiles');
    expect(refusal({ output: { ...cog, format: 'GIF' } })).toContain('"COG", "PNG", "WEBP", "JPEG"');
  });

  it('makes the format part of every key: another scene key, and tile keys ending in the format extension', () => {
    const source = { bucket: 'scenes', key: 'a.tif', versionToken: 'v1' };
    const asPng = png();
    expect(sceneKey(source, asPng)).not.toBe(sceneKey(source, DEFAULT_PARAMS));
    const scene = sceneKey(source, asPng);
    const grid = { width: 1024, height: 1024 };
    const job = makeTileJob(scene, source, asPng, grid, windowAt(tileGrid(1024, 1024, 512), 1, 0));
    expect(job.outputKey).toBe(`tiles/${scene}/1_0.png`);
    expect(parseTileJob(toJobMessage(job).body).outputKey).toBe(job.outputKey);
    expect(outputKeys.tile(scene, { row: 0, col: 0 }, { tms: 'WebMercatorQuad', z: 9, x: 3, y: 4 }, 'WEBP')).toBe(
      `tiles/${scene}/WebMercatorQuad/9/3/4.webp`,
    );
    expect(TILE_FORMATS.map((f) => outputKeys.tile('s', { row: 0, col: 0 }, undefined, f))).toEqual([
      'tiles/s/0_0.tif',
      'tiles/s/0_0.png',
      'tiles/s/0_0.webp',
      'tiles/s/0_0.jpg',
    ]);
    expect(TILE_FORMATS.map(tileContentType)).toEqual([
      'image/tiff; application=geotiff; profile=cloud-optimized',
      'image/png',
      'image/webp',
      'image/jpeg',
    ]);
    expect([tileFormatOf(asPng), tileFormatOf(DEFAULT_PARAMS)]).toEqual(['PNG', 'COG']);
  });
});

describe('stack configuration of rendered tiles (tessera:format, rescale, colormap, background)', () => {
  const ctx = { stack: 'test-stack', defaultArchiveDir: '/repo/dist' };
  const aws = { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1' };
  const problems = (values: Record<string, string>): readonly string[] => {
    try {
      parseStackConfig(values, ctx);
    } catch (e) {
      if (e instanceof StackConfigError) return e.problems;
      throw e;
    }
    throw new Error('the configuration was accepted');
  };

  it('puts the format into every job key of the stack', () => {
    const cfg = parseStackConfig(
      {
        ...aws,
        'tessera:format': 'png',
        'tessera:rescale': '-1,1',
        'tessera:colormap': 'viridis',
        'tessera:tms': 'WebMercatorQuad',
        'tessera:zoom': '12',
        'tessera:tilePx': '256',
      },
      ctx,
    );
    expect(cfg.params.output).toEqual({ format: 'PNG', nodata: -9999, rescale: [-1, 1], colormap: 'viridis' });
    expect(parseStackConfig(aws, ctx).params.output).toEqual(DEFAULT_PARAMS.output);
  });

  it('refuses what tessera run refuses, with the setting to change', () => {
    expect(problems({ ...aws, 'tessera:format': 'png' })[0]).toContain('--rescale MIN,MAX');
    expect(problems({ ...aws, 'tessera:format': 'png', 'tessera:rescale': '2,1' })[0]).toContain('min 2 must be less than max 1');
    expect(problems({ ...aws, 'tessera:format': 'png', 'tessera:rescale': '0,1', 'tessera:colormap': 'jet' })[0]).toContain(
      'not a known colormap',
    );
    expect(problems({ ...aws, 'tessera:format': 'jpeg', 'tessera:rescale': '0,1' })[0]).toContain('JPEG has no transparency');
    expect(problems({ ...aws, 'tessera:colormap': 'viridis' })[0]).toContain('set tessera:format to PNG, WEBP or JPEG');
    expect(problems({ ...aws, 'tessera:format': 'gif' })[0]).toContain('tessera:format must be one of COG, PNG, WEBP, JPEG');
    expect(problems({ ...aws, 'tessera:format': 'webp', 'tessera:rescale': '0,1', 'tessera:compression': 'ZSTD' })[0]).toContain(
      "set the COG tiles' codec",
    );
  });
});
