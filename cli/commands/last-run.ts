import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createLocalBackend, type LocalBackend } from '../../functions/local/compose.js';
import { LAST_RUN_FILE, type LastRun } from '../../functions/local/main-job.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';

export function loadLastRun(dir: string): LastRun {
  const file = join(dir, LAST_RUN_FILE);
  if (!existsSync(file)) {
    throw new InvalidParamsError(`no run found in ${dir}: run \`tessera run\` (or npm start) first, or pass --dir`);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as LastRun;
}

export function saveLastRun(dir: string, run: LastRun): void {
  writeFileSync(join(dir, LAST_RUN_FILE), JSON.stringify(run, null, 2));
}

/** Open an existing local backend with counters, logging JSON lines when verbose. */
export function openBackend(dir: string, verbose: boolean, log: (s: string) => void): { backend: LocalBackend; telemetry: JsonTelemetry } {
  const telemetry = new JsonTelemetry(verbose ? (line) => log(`${line}\n`) : () => {});
  return { backend: createLocalBackend(dir, { telemetry, maxReceiveCount: 5 }), telemetry };
}

/** `--window 3_7` -> {row: 3, col: 7} */
export function parseWindowId(raw: string): { row: number; col: number } {
  const m = /^(\d{1,6})_(\d{1,6})$/.exec(raw);
  if (!m) throw new InvalidParamsError(`window ${JSON.stringify(raw)} must be ROW_COL, e.g. 0_3`);
  return { row: Number(m[1]), col: Number(m[2]) };
}
