import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gdalScript } from './gdal.js';

/** What one whole run cost, the command and every process under it together. */
export interface TreeCost {
  readonly stdout: string;
  readonly wallMs: number;
  /** User + system CPU time of the command and every process it waited for (RUSAGE_CHILDREN). */
  readonly cpuSec: number;
  /** The largest single process's peak resident memory. */
  readonly peakProcessRssMb: number;
  /** The highest total resident memory of the whole process tree, sampled every {@link SAMPLE_MS}. */
  readonly peakTreeRssMb: number;
}

const SAMPLE_MS = 200;
const PAGE = 4096;

/** pid -> parent pid of every process on the machine, from /proc (Linux). */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // comm may hold spaces and parentheses: the fields after its closing parenthesis are fixed.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(name), ppid);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Total resident memory of `root` and all its descendants, in bytes. */
function treeRss(root: number): number {
  const ppid = parents();
  const inTree = new Set([root]);
  // Parents are not always listed before children: repeat until nothing joins.
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, parent] of ppid) {
      if (!inTree.has(pid) && inTree.has(parent)) {
        inTree.add(pid);
        grew = true;
      }
    }
  }
  let total = 0;
  for (const pid of inTree) {
    try {
      total += Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * PAGE;
    } catch {
      // exited between the listing and the read
    }
  }
  return total;
}

/**
 * Run a command to completion under bench/gdal/rusage_run.py (any python3:
 * getrusage of the whole tree it waited for) while sampling the tree's total
 * RSS from /proc. Throws with its output when it fails.
 */
export async function measureTree(
  python: string,
  command: readonly string[],
  options: { readonly cwd?: string; readonly timeoutMs?: number } = {},
): Promise<TreeCost> {
  const scratch = mkdtempSync(join(tmpdir(), 'tessera-bench-rusage-'));
  const out = join(scratch, 'rusage.json');
  try {
    let peak = 0;
    let stdout = '';
    let stderr = '';
    const started = performance.now();
    const child = spawn(python, [gdalScript('rusage_run.py'), JSON.stringify({ cmd: command, out })], {
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const sampler = setInterval(() => {
      if (child.pid !== undefined) peak = Math.max(peak, treeRss(child.pid));
    }, SAMPLE_MS);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 3_600_000);
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString()).slice(-32_768);
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    const wallMs = performance.now() - started;
    clearInterval(sampler);
    clearTimeout(timer);
    if (code !== 0) throw new Error(`[bench] ${command.join(' ').slice(0, 400)} exited ${code}:\n${stderr.trim() || stdout.slice(-4000)}`);
    const r = JSON.parse(readFileSync(out, 'utf8')) as { userSec: number; sysSec: number; maxRssKb: number };
    return {
      stdout,
      wallMs,
      cpuSec: r.userSec + r.sysSec,
      peakProcessRssMb: r.maxRssKb / 1024,
      peakTreeRssMb: Math.max(peak / 2 ** 20, r.maxRssKb / 1024),
    };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
