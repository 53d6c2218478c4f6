import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The repository root: every path in the benchmark is resolved from here. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The core every pinned measurement runs on (Tessera and GDAL alike). */
export const PINNED_CORE = 0;

let tasksetAvailable: boolean | undefined;

/** True when `taskset` (util-linux) can pin a process to one core here. */
export function canPin(): boolean {
  tasksetAvailable ??= spawnSync('taskset', ['-c', String(PINNED_CORE), 'true'], { stdio: 'ignore' }).status === 0;
  return tasksetAvailable;
}

/** `[command, ...args]` run on one core when `pin` and the machine allows it. */
export function pinned(command: string, args: readonly string[], pin: boolean): [string, string[]] {
  return pin && canPin() ? ['taskset', ['-c', String(PINNED_CORE), command, ...args]] : [command, [...args]];
}

export interface RunOptions {
  /** Run on one core (taskset -c 0). */
  readonly pin?: boolean;
  readonly timeoutMs?: number;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
}

export interface RunResult {
  readonly stdout: string;
  readonly stderr: string;
  /** Wall time of the whole process, as the parent saw it. */
  readonly wallMs: number;
}

/**
 * Run a command to completion; throws with its output when it fails, so a
 * broken measurement is never mistaken for a fast one.
 */
export function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const [cmd, argv] = pinned(command, args, options.pin ?? false);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(cmd, argv, {
      cwd: options.cwd ?? REPO_ROOT,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString()).slice(-32_768);
    });
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            child.kill('SIGKILL');
          }, options.timeoutMs);
    child.on('error', (error) => {
      if (timer) clearTimeout(timer);
      reject(new Error(`[bench] cannot start ${command}: ${error.message}`, { cause: error }));
    });
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      const wallMs = performance.now() - started;
      if (code === 0) return resolve({ stdout, stderr, wallMs });
      const why = signal
        ? `was killed by ${signal}${signal === 'SIGKILL' && options.timeoutMs ? ` after ${options.timeoutMs} ms` : ''}`
        : `exited ${code}`;
      reject(new Error(`[bench] ${[command, ...args].join(' ').slice(0, 400)} ${why}:\n${stderr.trim() || stdout.trim().slice(-4000)}`));
    });
  });
}

/**
 * Run one of bench/workers/*.ts in a fresh Node process (through tsx) and
 * return the JSON object it prints as its last line of output. A child per
 * measurement keeps peak memory and JIT state of one measurement out of the
 * next.
 */
export async function runWorker<T>(worker: string, input: unknown, options: RunOptions = {}): Promise<T & { wallMs: number }> {
  const script = fileURLToPath(new URL(`../workers/${worker}.ts`, import.meta.url));
  const { stdout, wallMs } = await run(process.execPath, ['--import', 'tsx', script, JSON.stringify(input)], options);
  const last = stdout.trim().split('\n').pop() ?? '';
  try {
    return { ...(JSON.parse(last) as T), wallMs };
  } catch (cause) {
    throw new Error(`[bench] worker ${worker} printed no JSON result; its output ended with: ${stdout.slice(-2000)}`, { cause });
  }
}
