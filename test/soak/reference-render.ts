/**
 * The soak oracle's reference render, run in a clean child process (no fault
 * proxy, no claim store, no queue, no state shared with the soak): for each
 * scene version, the exact bytes of every object the soak staged for it (one
 * file, or a STAC Item and its band files), the processing parameters and the
 * grid, it renders every window with the same render code the workers run
 * (shared/app/render-tile.ts) from an in-memory store and prints the SHA-256
 * and size of each tile. The windows named in `keep` are also written to
 * disk: the sample the oracle compares with GDAL's own render
 * (test/soak/gdal-check.ts), since sharing `renderTile` with the workers, this
 * render cannot catch a bug of its own.
 *
 * stdin: JSON `ReferenceRequest[]`; stdout: JSON `ReferenceAnswer[]`, in order.
 * Run as `node --import tsx test/soak/reference-render.ts < request.json`.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderTile } from '../../shared/app/render-tile.js';
import { makeTileJob } from '../../shared/app/tile-job.js';
import { type AssetRef, type ProcessingParams, type SourceRef, sceneKey } from '../../shared/domain/job-key.js';
import { type TileGrid, windows } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { parseExpression } from '../../shared/raster/index.js';
import { MemoryObjectStore } from '../support/memory-object-store.js';

export interface ReferenceRequest {
  /** The scene version's id in the soak (its scene key there). */
  readonly id: string;
  /** Every object of the scene (the anchor, and each band object of a multi-file scene): its key and a file of its bytes. */
  readonly objects: readonly { readonly key: string; readonly bytesPath: string }[];
  /** The scene's source as its manifest records it: its keys are staged here, its version tokens are this store's. */
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  readonly grid: TileGrid;
  /** Windows (`row_col`) whose tile is also written to `<keepDir>/<file-safe id>-<row_col>.tif`. */
  readonly keep?: readonly string[] | undefined;
  readonly keepDir?: string | undefined;
}

export interface ReferenceAnswer {
  readonly id: string;
  /** `row_col` -> SHA-256 (hex) and size of the tile's bytes. */
  readonly tiles: Record<string, { readonly sha256: string; readonly size: number }>;
  /** `row_col` -> where the kept tile was written. */
  readonly kept: Record<string, string>;
}

/** Where a kept tile of scene `id` goes. */
export const keptTilePath = (dir: string, id: string, window: string): string => join(dir, `${id.slice(0, 16)}-${window}.tif`);

async function main(): Promise<void> {
  const requests = JSON.parse(readFileSync(0, 'utf8')) as ReferenceRequest[];
  const answers: ReferenceAnswer[] = [];
  for (const r of requests) {
    const store = new MemoryObjectStore();
    const versions = new Map<string, string>();
    for (const o of r.objects) {
      const put = await store.putIfAbsent(o.key, readFileSync(o.bytesPath));
      if (put.kind !== 'written') throw new Error(`reference store refused ${o.key}`);
      versions.set(o.key, put.version);
    }
    const versionOf = (key: string): string => {
      const v = versions.get(key);
      if (v === undefined) throw new Error(`scene ${r.id} names ${key}, which the request did not stage`);
      return v;
    };
    const assets =
      r.source.assets === undefined
        ? undefined
        : Object.fromEntries(
            Object.entries(r.source.assets).map(([band, a]): [string, AssetRef] => [band, { key: a.key, versionToken: versionOf(a.key) }]),
          );
    const source: SourceRef = {
      bucket: 'reference',
      key: r.source.key,
      versionToken: versionOf(r.source.key),
      ...(assets === undefined ? {} : { assets }),
    };
    const tiling = tilingParams(r.params);
    const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
    const tiles: ReferenceAnswer['tiles'] = {};
    const kept: ReferenceAnswer['kept'] = {};
    for (const w of windows(r.grid)) {
      const job = makeTileJob(sceneKey(source, r.params), source, r.params, r.grid, w);
      const bytes = await renderTile(store, job, tiling, expression);
      const id = `${w.row}_${w.col}`;
      tiles[id] = { sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.byteLength };
      if (r.keep?.includes(id) && r.keepDir !== undefined) {
        kept[id] = keptTilePath(r.keepDir, r.id, id);
        writeFileSync(kept[id], bytes);
      }
    }
    answers.push({ id: r.id, tiles, kept });
  }
  process.stdout.write(JSON.stringify(answers));
}

main().catch((error: unknown) => {
  process.stderr.write(`reference render failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
