import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * AIS-like position batches for `tessera stream --generate`, the benchmark and the tests: NDJSON files of
 * `{vessel, time, lon, lat, speed}` (some with an `id`), as a Firehose delivery stream would land them, with what a
 * real stream carries besides: records a retrying producer wrote into two batch objects, and bad lines (no position,
 * AIS's 181/91 "not available", text that is not JSON). Deterministic: the same seed writes the same bytes, so a second
 * `--generate` run writes objects the store already holds (the same versions, the same batch keys).
 */
export interface AisBatchSpec {
  readonly batches: number;
  readonly recordsPerBatch: number;
  readonly seed?: number | undefined;
  /** Vessels moving about (default 200). */
  readonly vessels?: number | undefined;
  /** Share of each batch's records copied from the batch before it (default 0.01: a retried Firehose put). */
  readonly duplicateShare?: number | undefined;
  /** Share of each batch's lines that are bad (default 0.005). */
  readonly badShare?: number | undefined;
}

/** What was generated: what the oracle of a run expects. */
export interface AisBatchTruth {
  readonly files: readonly string[];
  /** Lines written that are positions (duplicates included). */
  readonly positionLines: number;
  /** Distinct positions: what the records table must hold once every batch is in. */
  readonly distinctRecords: number;
  readonly duplicateLines: number;
  readonly badLines: number;
}

/** mulberry32: a small seeded PRNG, so a batch set is reproducible without a dependency. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const START_MS = Date.UTC(2025, 5, 1, 12, 0, 0);
const BAD_LINES = [
  (mmsi: number, t: string) => JSON.stringify({ vessel: mmsi, time: t, speed: 3.2 }), // no position
  (mmsi: number, t: string) => JSON.stringify({ vessel: mmsi, time: t, lon: 181, lat: 91, speed: 0 }), // AIS "not available"
  (mmsi: number, t: string) => `{"vessel": ${mmsi}, "time": "${t}", "lon": 4.1, "lat"`, // cut off
];

/** The lines of every batch, in order (no files written): for tests that stage them in a store themselves. */
export function aisBatchLines(spec: AisBatchSpec): { readonly batches: readonly string[][]; readonly truth: Omit<AisBatchTruth, 'files'> } {
  const rand = prng(spec.seed ?? 42);
  const vesselCount = spec.vessels ?? 200;
  const dupShare = spec.duplicateShare ?? 0.01;
  const badShare = spec.badShare ?? 0.005;
  // A fleet in the North Sea and the Skagerrak, each vessel on its own heading.
  const fleet = Array.from({ length: vesselCount }, (_, i) => ({
    mmsi: 219_000_000 + i * 37,
    lon: 3 + rand() * 8,
    lat: 53 + rand() * 5,
    heading: rand() * 2 * Math.PI,
    speed: 2 + rand() * 16,
  }));
  const batches: string[][] = [];
  let previous: string[] = [];
  let positionLines = 0;
  let distinct = 0;
  let duplicateLines = 0;
  let badLines = 0;
  let clockMs = START_MS;
  for (let b = 0; b < spec.batches; b++) {
    const lines: string[] = [];
    const positions: string[] = [];
    for (let r = 0; r < spec.recordsPerBatch; r++) {
      const v = fleet[Math.floor(rand() * fleet.length)] as (typeof fleet)[number];
      clockMs += 1 + Math.floor(rand() * 40);
      const time = new Date(clockMs).toISOString();
      const roll = rand();
      if (roll < badShare) {
        lines.push((BAD_LINES[Math.floor(rand() * BAD_LINES.length)] as (typeof BAD_LINES)[number])(v.mmsi, time));
        badLines++;
        continue;
      }
      if (roll < badShare + dupShare && previous.length > 0) {
        // A record the producer already put in the last batch object, written again after a retry.
        lines.push(previous[Math.floor(rand() * previous.length)] as string);
        duplicateLines++;
        positionLines++;
        continue;
      }
      // ~ 1 nautical mile a minute at 60 knots; the step is small, the track plausible.
      const step = (v.speed / 3600) * (1 / 60);
      v.lon = Math.max(-180, Math.min(180, v.lon + Math.sin(v.heading) * step));
      v.lat = Math.max(-90, Math.min(90, v.lat + Math.cos(v.heading) * step));
      v.heading += (rand() - 0.5) * 0.1;
      const record: Record<string, unknown> = {
        vessel: v.mmsi,
        time,
        lon: Math.round(v.lon * 1e6) / 1e6,
        lat: Math.round(v.lat * 1e6) / 1e6,
        speed: Math.round(v.speed * 10) / 10,
      };
      // One producer in ten names its records.
      if (v.mmsi % 10 === 3) record.id = `${v.mmsi}-${clockMs}`;
      const line = JSON.stringify(record);
      lines.push(line);
      positions.push(line);
      positionLines++;
      distinct++;
    }
    batches.push(lines);
    previous = positions;
  }
  return { batches, truth: { positionLines, distinctRecords: distinct, duplicateLines, badLines } };
}

/** Write the batches as `part-00001.ndjson`, ... under `dir/<stream>/`; returns the files and what they hold. */
export function writeAisBatches(dir: string, spec: AisBatchSpec, stream = 'ais'): AisBatchTruth {
  const { batches, truth } = aisBatchLines(spec);
  const folder = join(dir, stream);
  mkdirSync(folder, { recursive: true });
  const files = batches.map((lines, i) => {
    const file = join(folder, `part-${String(i + 1).padStart(5, '0')}.ndjson`);
    writeFileSync(file, `${lines.join('\n')}\n`);
    return file;
  });
  return { files, ...truth };
}
