import { describe, expect, it } from 'vitest';
import { parseStackConfig, StackConfigError } from '../../infra/common/config.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';

/** tessera:tms and tessera:zoom (issue 26 section 1): a stack's tiles on a tile matrix set, one zoom or a pyramid. */

const ctx = { stack: 'test-stack', defaultArchiveDir: '/repo/dist' };
const aws = { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1', 'tessera:tilePx': '256' };

function problems(values: Record<string, string>): readonly string[] {
  try {
    parseStackConfig(values, ctx);
  } catch (e) {
    if (e instanceof StackConfigError) return e.problems;
    throw e;
  }
  throw new Error('the configuration was accepted');
}

describe('stack configuration: tessera:tms and tessera:zoom', () => {
  it('puts a zoom range into the processing parameters as zoom and min_zoom, one zoom as zoom alone', () => {
    const range = parseStackConfig({ ...aws, 'tessera:tms': 'WebMercatorQuad', 'tessera:zoom': '8-14' }, ctx);
    expect(range.params).toMatchObject({ tms: 'WebMercatorQuad', zoom: 14, min_zoom: 8, tile_px: 256 });
    expect(tilingParams(range.params).target.tms).toEqual({ id: 'WebMercatorQuad', zoom: 14, minZoom: 8 });
    const one = parseStackConfig({ ...aws, 'tessera:tms': 'WebMercatorQuad', 'tessera:zoom': '14-14' }, ctx);
    expect(one.params).toMatchObject({ tms: 'WebMercatorQuad', zoom: 14 });
    expect(one.params).not.toHaveProperty('min_zoom');
    expect(parseStackConfig(aws, ctx).params).not.toHaveProperty('tms');
  });

  it('refuses a range upside down, a zoom outside the set, and one key without the other, naming the fix', () => {
    expect(problems({ ...aws, 'tessera:tms': 'WebMercatorQuad', 'tessera:zoom': '14-8' })).toEqual([
      expect.stringMatching(/tessera:zoom 14-8: the lower zoom comes first, e\.g\. tessera:zoom 8-14/),
    ]);
    expect(problems({ ...aws, 'tessera:tms': 'UTM31WGS84Quad', 'tessera:zoom': '0-6' })).toEqual([
      expect.stringMatching(/the zoom range 0-6 is outside UTM31WGS84Quad, whose zooms are 1 to 24/),
    ]);
    expect(problems({ ...aws, 'tessera:zoom': '8-14' })).toEqual([expect.stringMatching(/tessera:tms and tessera:zoom go together/)]);
  });
});
