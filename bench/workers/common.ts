import { readFileSync } from 'node:fs';
import { ENV } from '../../shared/domain/runtime-config.js';
import { tuneHeapForTiles } from '../../shared/raster/heap-tuning.js';

/** Peak and current memory of this process, in KiB, as the kernel counts it. */
export interface MemoryReading {
  /** Peak resident set size (getrusage ru_maxrss). */
  readonly maxRssKb: number;
  /** Peak resident set size from /proc/self/status (VmHWM); undefined off Linux. */
  readonly vmHwmKb: number | undefined;
  /** Resident set size now (VmRSS); undefined off Linux. */
  readonly vmRssKb: number | undefined;
}

function statusField(name: string): number | undefined {
  try {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

export function memory(): MemoryReading {
  return { maxRssKb: process.resourceUsage().maxRSS, vmHwmKb: statusField('VmHWM'), vmRssKb: statusField('VmRSS') };
}

/**
 * The body of a benchmark child process: reads its JSON input from argv,
 * prints its JSON result as the last line of stdout, and exits non-zero
 * with the error on stderr when the measurement breaks.
 */
export function workerMain<I, O>(body: (input: I) => Promise<O>): void {
  const raw = process.argv[2];
  if (raw === undefined) {
    process.stderr.write('this is a benchmark child process: run it through `npm run bench`\n');
    process.exit(2);
  }
  body(JSON.parse(raw) as I).then(
    (out) => {
      process.stdout.write(`${JSON.stringify(out)}\n`);
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}

/**
 * {@link workerMain} for a child that stands for Tessera's tile worker: the process is set up as every tile process
 * Tessera runs is (a local worker process, each cloud's tile function): its garbage collector tuned for tiles
 * (shared/raster/heap-tuning.ts), before the body starts.
 */
export function tileWorkerMain<I, O>(body: (input: I) => Promise<O>): void {
  tuneHeapForTiles(process.env[ENV.tileHeapGrowingPercent]);
  workerMain(body);
}
