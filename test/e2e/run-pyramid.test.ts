import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatSummary } from '../../cli/commands/run.js';
import { main } from '../../cli/main.js';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';

/**
 * `tessera run --zoom MIN-MAX` (issue 26 section 1): a pyramid through the CLI, its worker processes and the mosaic, and
 * the bad zoom ranges refused before anything is staged (docs/pyramids.md).
 */

async function run(argv: string[], cwd: string): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t), cwd });
  return { code, out, err };
}

describe('tessera run --zoom MIN-MAX', () => {
  it('tiles every zoom of the range, each tile once, with duplicates and a stalled worker; the mosaic is the highest zoom', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-run-pyramid-'));
    try {
      const argv = ['run', '--size', '512', '--tile', '256', '--tms', 'WebMercatorQuad', '--zoom', '12-14', '--workers', '2'];
      const { code, out } = await run([...argv, '--demo', '--json', '--dir', join(dir, 'backend')], dir);
      expect(code).toBe(0);
      const s = JSON.parse(out.trim().split('\n').pop() as string) as MainJobSummary;
      expect(s).toMatchObject({ ok: true, tms: 'WebMercatorQuad', zoom: 14, minZoom: 12, gridCount: 16, manifestCount: 16 });
      const outputs = new FsObjectStore(join(dir, 'backend', 'outputs'));
      const perZoom: Record<string, number> = {};
      for await (const h of outputs.list(`tiles/${s.sceneKey}/`)) {
        const zoom = /\/WebMercatorQuad\/(\d+)\/\d+\/\d+\.tif$/.exec(h.key)?.[1] ?? h.key;
        perZoom[zoom] = (perZoom[zoom] ?? 0) + 1;
      }
      expect(perZoom).toEqual({ 14: 16, 13: 4, 12: 1 });
      expect(s.pyramidTiles).toBe(21);
      expect(s.tilesWritten).toBe(21);
      expect(formatSummary(s)).toMatch(/WebMercatorQuad zooms 12-14 \(21 tiles; the mosaic is zoom 14\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('refuses a range upside down, outside the set or not a range, before staging anything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-run-pyramid-bad-'));
    const cases: [string, RegExp][] = [
      ['14-8', /--zoom 14-8: the lower zoom comes first, e.g. --zoom 8-14/],
      ['20-25', /the zoom range 20-25 is outside WebMercatorQuad, whose zooms are 0 to 24: choose zooms within them/],
      ['8..14', /--zoom must be a zoom or a range MIN-MAX/],
    ];
    for (const [zoom, message] of cases) {
      const { code, err } = await run(['run', '--tms', 'WebMercatorQuad', '--zoom', zoom, '--tile', '256', '--dir', join(dir, 'b')], dir);
      expect(code, zoom).not.toBe(0);
      expect(err, zoom).toMatch(message);
    }
    rmSync(dir, { recursive: true, force: true });
  });
});
