/**
 * The soak oracle's reference render, run in a clean child process (no fault
 * proxy, no claim store, no queue, no state shared with the soak): for each
 * scene version, the exact source bytes the soak staged, the processing
 * parameters and the grid, it renders every window with the same render code
 * the workers run (shared/app/render-tile.ts) from an in-memory store and
 * prints the SHA-256 and size of each tile.
 *
 * stdin: JSON `ReferenceRequest[]`; stdout: JSON `ReferenceAnswer[]`, in order.
 * Run as `node --import tsx test/soak/reference-render.ts < request.json`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { renderTile } from '../../shared/app/render-tile.js';
import { makeTileJob } from '../../shared/app/tile-job.js';
import { type ProcessingParams, sceneKey } from '../../shared/domain/job-key.js';
import { type TileGrid, windows } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { parseExpression } from '../../shared/raster/index.js';
import { MemoryObjectStore } from '../support/memory-object-store.js';

export interface ReferenceRequest {
  /** The scene version's id in the soak (its scene key there). */
  readonly id: string;
  /** A file holding the source bytes of that version. */
  readonly bytesPath: string;
  readonly params: ProcessingParams;
  readonly grid: TileGrid;
}

export interface ReferenceAnswer {
  readonly id: string;
  /** `row_col` -> SHA-256 (hex) and size of the tile's bytes. */
  readonly tiles: Record<string, { readonly sha256: string; readonly size: number }>;
}

async function main(): Promise<void> {
  const requests = JSON.parse(readFileSync(0, 'utf8')) as ReferenceRequest[];
  const answers: ReferenceAnswer[] = [];
  for (const r of requests) {
    const store = new MemoryObjectStore();
    const key = 'reference/source.tif';
    const put = await store.putIfAbsent(key, readFileSync(r.bytesPath));
    if (put.kind !== 'written') throw new Error(`reference store refused ${key}`);
    const source = { bucket: 'reference', key, versionToken: put.version };
    const tiling = tilingParams(r.params);
    const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
    const tiles: ReferenceAnswer['tiles'] = {};
    for (const w of windows(r.grid)) {
      const job = makeTileJob(sceneKey(source, r.params), source, r.params, r.grid, w);
      const bytes = await renderTile(store, job, tiling, expression);
      tiles[`${w.row}_${w.col}`] = { sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.byteLength };
    }
    answers.push({ id: r.id, tiles });
  }
  process.stdout.write(JSON.stringify(answers));
}

main().catch((error: unknown) => {
  process.stderr.write(`reference render failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
