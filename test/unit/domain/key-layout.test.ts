import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AREAS,
  type AreaName,
  accessOf,
  areaOfKey,
  areaPrefix,
  FUNCTION_ROLES,
  outputKeys,
  parseKeys,
  ROLE_ACCESS,
  SWEEP_STATE_KEY,
  sceneLifecycleKeys,
  verifyKeys,
} from '../../../shared/domain/key-layout.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const SCENE = 'a'.repeat(64);

/** Every .ts file under the folders that build keys at run time or deploy grants. */
function sources(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts')) out.push(path);
    }
  };
  for (const top of ['shared', 'functions', 'infra', 'cli']) {
    try {
      walk(join(ROOT, top));
    } catch {
      // A folder this checkout does not have (cli/ before it exists).
    }
  }
  return out;
}

/** The code of a file with its comments blanked (a comment may name a prefix to explain it). */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, ' ')).replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

describe('the key layout', () => {
  it('is the only place that names a prefix: no string or template literal elsewhere starts with one', () => {
    const prefixes = (Object.keys(AREAS) as AreaName[]).map((a) => AREAS[a].prefix);
    const literal = new RegExp(`['"\`](${prefixes.map((p) => p.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|')})`);
    const found: string[] = [];
    for (const file of sources()) {
      if (file.endsWith(join('shared', 'domain', 'key-layout.ts'))) continue;
      code(readFileSync(file, 'utf8'))
        .split('\n')
        .forEach((line, i) => {
          if (literal.test(line)) found.push(`${relative(ROOT, file)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
  });

  it('the grep finds a prefix literal when one is there (the check can fail)', () => {
    const prefixes = (Object.keys(AREAS) as AreaName[]).map((a) => AREAS[a].prefix);
    const literal = new RegExp(`['"\`](${prefixes.map((p) => p.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|')})`);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a template literal is the input here
    expect(literal.test(code('const k = `index/scenes/${hour}`;'))).toBe(true);
    expect(literal.test(code("const k = 'tiles/' + scene;"))).toBe(true);
    expect(literal.test(code('// tiles/ are written create-only'))).toBe(false);
  });

  it('puts every key it builds in an area some role writes, and reads each back', () => {
    const built: [string, AreaName][] = [
      [outputKeys.tile(SCENE, { row: 1, col: 2 }), 'tiles'],
      [outputKeys.tile(SCENE, { row: 0, col: 0 }, { tms: 'WebMercatorQuad', z: 8, x: 1, y: 2 }), 'tiles'],
      [outputKeys.sceneManifest(SCENE), 'scenes'],
      [outputKeys.mosaic(SCENE), 'mosaics'],
      [outputKeys.cogMosaic(SCENE), 'mosaics'],
      [outputKeys.stacItem(SCENE), 'mosaics'],
      [sceneLifecycleKeys.superseded(SCENE), 'scenes'],
      [sceneLifecycleKeys.chunkDone(SCENE, 0, 100), 'scenes'],
      [sceneLifecycleKeys.fannedOut(SCENE), 'scenes'],
      [sceneLifecycleKeys.closedOut(SCENE), 'mosaics'],
      [sceneLifecycleKeys.indexEntry('2026120204', SCENE), 'sceneIndex'],
      [SWEEP_STATE_KEY, 'sweepState'],
      [verifyKeys.race('run-1'), 'verify'],
    ];
    for (const [key, area] of built) {
      expect(areaOfKey('outputs', key), key).toBe(area);
      const writers = FUNCTION_ROLES.filter((r) => accessOf(r, area).includes('create'));
      expect(writers.length, `${key}: no role creates it`).toBeGreaterThan(0);
    }
    expect(parseKeys.sceneManifest(outputKeys.sceneManifest(SCENE))).toBe(SCENE);
    expect(parseKeys.mosaicOrClosedOut(outputKeys.mosaic(SCENE))).toBe(SCENE);
    expect(parseKeys.mosaicOrClosedOut(sceneLifecycleKeys.closedOut(SCENE))).toBe(SCENE);
    expect(parseKeys.indexEntry(sceneLifecycleKeys.indexEntry('2026120204', SCENE))).toEqual({ hour: '2026120204', scene: SCENE });
    expect(parseKeys.sceneManifest(sceneLifecycleKeys.superseded(SCENE))).toBeUndefined();
  });

  it("resolves the source area to the stack's own prefix", () => {
    expect(areaPrefix('source', 'landsat/')).toBe('landsat/');
    expect(areaOfKey('sources', 'landsat/a.tif', 'landsat/')).toBe('source');
    expect(areaOfKey('sources', 'scenes/a.tif', 'landsat/')).toBeUndefined();
    expect(areaOfKey('sources', 'staging/run-1/x.tif', 'landsat/')).toBe('staging');
  });

  it('names each area once per role, with a reason, and grants no deployed function a delete', () => {
    for (const role of FUNCTION_ROLES) {
      const areas = ROLE_ACCESS[role].map((g) => g.area);
      expect(new Set(areas).size, role).toBe(areas.length);
      for (const g of ROLE_ACCESS[role]) expect(g.why.length, `${role} ${g.area}`).toBeGreaterThan(10);
      // Outputs are create-only: only the operator's smoke test cleans up after itself.
      if (role !== 'verify') for (const g of ROLE_ACCESS[role]) expect(g.access, `${role} ${g.area}`).not.toContain('delete');
    }
  });
});
