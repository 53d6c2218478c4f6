import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { bundleDefines } from '../../../scripts/build-functions.js';
import {
  CODE_VERSION_DEFINE,
  codeVersion,
  computeCodeVersion,
  RENDER_PATH_ROOTS,
  renderPathFiles,
} from '../../../shared/domain/code-version.js';
import { sceneKey } from '../../../shared/domain/job-key.js';

const root = resolve(import.meta.dirname, '../../..');
const read = (path: string): string | undefined => {
  try {
    return readFileSync(join(root, path), 'utf8');
  } catch {
    return undefined;
  }
};
/** The tree as it would be with one file changed. */
const withFile = (path: string, text: string) => (p: string) => (p === path ? text : read(p));
const pkgVersion = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;

describe('the code version', () => {
  it('is the package version and 16 hex digits of the render path digest', () => {
    expect(codeVersion()).toMatch(new RegExp(`^${pkgVersion.replace(/\./g, '\\.')}\\+[0-9a-f]{16}$`));
    expect(codeVersion()).toBe(computeCodeVersion(root));
  });

  it('covers the band math, the encoder and the window reads, not the gates', () => {
    const files = renderPathFiles(read);
    for (const f of [
      'shared/app/render-tile.ts',
      'shared/raster/expression.ts',
      'shared/raster/cog-writer.ts',
      'shared/raster/codecs.ts',
      'shared/raster/geotiff-source.ts',
      'shared/domain/tiling-params.ts',
      'shared/domain/tile-grid.ts',
    ])
      expect(files).toContain(f);
    for (const f of ['shared/app/process-tile.ts', 'shared/app/deliveries.ts', 'shared/ports/claim-store.port.ts'])
      expect(files).not.toContain(f);
  });

  it('is exactly the set of repository modules esbuild bundles for the render path roots', async () => {
    const r = await build({
      absWorkingDir: root,
      entryPoints: RENDER_PATH_ROOTS.map((f) => join(root, f)),
      bundle: true,
      platform: 'node',
      format: 'esm',
      write: false,
      metafile: true,
      outdir: join(root, '.tessera-code-version-check'),
      logLevel: 'silent',
    });
    const inputs = Object.keys(r.metafile.inputs)
      .map((i) => relative(root, resolve(root, i)))
      .filter((i) => !i.startsWith('node_modules/') && !i.startsWith('node:'))
      .sort();
    expect(renderPathFiles(read)).toEqual(inputs);
  });

  it.each([
    ['new band math', 'shared/raster/expression.ts'],
    ['a new encoder setting', 'shared/raster/cog-writer.ts'],
    ['a new parameter default', 'shared/domain/tiling-params.ts'],
  ])('changes with %s, and so does every scene key', (_what, file) => {
    const changed = computeCodeVersion(root, withFile(file, `${read(file)}\n// changed\n`));
    expect(changed).not.toBe(codeVersion());
    const src = { bucket: 'b', key: 'k.tif', versionToken: '"v"' };
    const params = { pipeline: 'ndvi-tiler', version: '1.0.0' };
    expect(sceneKey(src, params, changed)).not.toBe(sceneKey(src, params));
  });

  it('does not change when only the gates change', () => {
    expect(computeCodeVersion(root, withFile('shared/app/process-tile.ts', '// rewritten\n'))).toBe(codeVersion());
  });

  it('changes with the package version', () => {
    const pkg = JSON.parse(read('package.json') as string) as Record<string, unknown>;
    expect(computeCodeVersion(root, withFile('package.json', JSON.stringify({ ...pkg, version: '9.9.9' })))).toMatch(/^9\.9\.9\+/);
  });

  it('a bundle carries the version the build computed, the same one a process running from source computes', async () => {
    const defines = bundleDefines(root);
    expect(defines[CODE_VERSION_DEFINE]).toBe(JSON.stringify(codeVersion()));
    const bundleWith = async (define: Record<string, string>) => {
      const r = await build({
        absWorkingDir: root,
        entryPoints: [join(root, 'shared/domain/code-version.ts')],
        bundle: true,
        platform: 'node',
        format: 'esm',
        write: false,
        define,
        logLevel: 'silent',
      });
      const file = join(mkdtempSync(join(tmpdir(), 'tessera-code-version-')), 'index.mjs');
      writeFileSync(file, r.outputFiles[0]?.contents ?? new Uint8Array());
      return (await import(pathToFileURL(file).href)) as { codeVersion(): string };
    };
    expect((await bundleWith(defines)).codeVersion()).toBe(codeVersion());
    // The bundle uses the build's value, never a digest of whatever files lie around it at run time.
    expect((await bundleWith({ ...defines, [CODE_VERSION_DEFINE]: '"0.0.0+fixedbythebuild"' })).codeVersion()).toBe(
      '0.0.0+fixedbythebuild',
    );
  });
});
