import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// The layer rules of docs/architecture.md, checked on every import in the tree.
const root = resolve(import.meta.dirname, '../..');

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) out.push(...files(path));
    else if (/\.(ts|mts|mjs|js)$/.test(name)) out.push(path);
  }
  return out;
}

interface Import {
  file: string;
  spec: string;
  /** Resolved repo-relative path for relative imports. */
  target: string | undefined;
}

function importsOf(file: string): Import[] {
  const text = readFileSync(join(root, file), 'utf8');
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map(
    (m) => (m[1] ?? m[2]) as string,
  );
  return specs.map((spec) => ({
    file,
    spec,
    target: spec.startsWith('.') ? relative(root, resolve(root, file, '..', spec)) : undefined,
  }));
}

/** The repo-relative file an import target names: `x.js` is `x.ts` in this tree (`moduleResolution: Bundler`). */
function sourceOf(target: string, known: ReadonlySet<string>): string | undefined {
  for (const candidate of [
    target,
    target.replace(/\.js$/, '.ts'),
    target.replace(/\.mjs$/, '.mts'),
    `${target}.ts`,
    `${target}/index.ts`,
  ]) {
    if (known.has(candidate)) return candidate;
  }
  return undefined;
}

/**
 * Every strongly connected group of files that import each other, directly or round a longer circle
 * (Tarjan's algorithm over the relative imports; a file importing itself counts). `extra` adds edges, so the
 * test can show the check finds a cycle.
 */
function importCycles(sources: readonly string[], extra: readonly (readonly [string, string])[] = []): string[][] {
  const known = new Set(sources);
  const edges = new Map<string, string[]>(sources.map((f) => [f, []]));
  for (const i of sources.flatMap(importsOf)) {
    const to = i.target === undefined ? undefined : sourceOf(i.target, known);
    if (to !== undefined) edges.get(i.file)?.push(to);
  }
  for (const [from, to] of extra) edges.get(from)?.push(to);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (f: string) => {
    index.set(f, index.size);
    low.set(f, index.get(f) as number);
    stack.push(f);
    onStack.add(f);
    for (const to of edges.get(f) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(f, Math.min(low.get(f) as number, low.get(to) as number));
      } else if (onStack.has(to)) low.set(f, Math.min(low.get(f) as number, index.get(to) as number));
    }
    if (low.get(f) !== index.get(f)) return;
    const group: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      group.push(member);
    } while (member !== f);
    if (group.length > 1 || edges.get(f)?.includes(f)) cycles.push(group.sort());
  };
  for (const f of sources) if (!index.has(f)) visit(f);
  return cycles;
}

const CLOUD_SDK = /^(@aws-sdk|@google-cloud|@azure|@pulumi|better-sqlite3|node:sqlite|aws-lambda|@firestore-emulator|azurite|pg$|pg\/)/;

describe('architecture', () => {
  const shared = files('shared');
  const functions = files('functions');
  const infra = files('infra');
  const cli = files('cli');

  it('the core imports OpenTelemetry through its API only: the SDK and exporters are wired in functions/ (docs/telemetry.md)', () => {
    const bad = shared.flatMap(importsOf).filter((i) => i.spec.startsWith('@opentelemetry/') && i.spec !== '@opentelemetry/api');
    expect(bad).toEqual([]);
  });

  it('the core (shared/) imports no cloud SDK, no Pulumi, no SQLite', () => {
    const bad = shared.flatMap(importsOf).filter((i) => CLOUD_SDK.test(i.spec));
    expect(bad).toEqual([]);
  });

  it('the core imports nothing outside shared/ (no functions/, cli/ or infra/)', () => {
    const bad = shared.flatMap(importsOf).filter((i) => i.target !== undefined && !i.target.startsWith('shared/'));
    expect(bad).toEqual([]);
  });

  it('the core never reads process.env and takes time from the Clock port', () => {
    const offenders = shared.filter((f) => {
      const text = readFileSync(join(root, f), 'utf8').replace(/\/\/.*|\/\*[\s\S]*?\*\//g, '');
      if (/process\.env/.test(text)) return true;
      // The one wall clock lives in shared/app/telemetry.ts (systemClock).
      // So do its one timer (systemClock.every): the core schedules through the Clock port only.
      // One exception, and not a clock: the COG encoder on one lane gives the event loop a turn between
      // blocks (setImmediate, no delay) so the lease keeper's renewals are not held up by a long encode.
      const text2 = f === 'shared/raster/cog-writer.ts' ? text.replace(/setImmediate\(resolve\)/, '') : text;
      return f !== 'shared/app/telemetry.ts' && /Date\.now\(\)|new Date\(\)|\bset(Timeout|Interval|Immediate)\s*\(/.test(text2);
    });
    expect(offenders).toEqual([]);
  });

  it('domain and ports do not depend on use cases or adapters', () => {
    const inner = shared.filter((f) => f.startsWith('shared/domain/') || f.startsWith('shared/ports/'));
    const bad = inner.flatMap(importsOf).filter((i) => i.target?.startsWith('shared/app/') || i.target?.startsWith('shared/raster/'));
    expect(bad).toEqual([]);
  });

  it('placement (catalog, prices, chooser) is its own context: the tile pipeline never imports it, and it imports no use case, port or raster code', () => {
    const pipeline = shared.filter((f) => !f.startsWith('shared/placement/'));
    const intoPlacement = pipeline.flatMap(importsOf).filter((i) => i.target?.startsWith('shared/placement/'));
    expect(intoPlacement).toEqual([]);
    const placement = shared.filter((f) => f.startsWith('shared/placement/'));
    expect(placement).toContain('shared/placement/choose-provider.ts');
    const outOfPlacement = placement
      .flatMap(importsOf)
      .filter((i) => i.target !== undefined && !i.target.startsWith('shared/placement/') && !i.target.startsWith('shared/domain/'));
    expect(outOfPlacement).toEqual([]);
  });

  it('no cloud adapter imports another cloud or the local backend', () => {
    // One exception, a composition root: functions/verify/ wires `tessera verify` (and `tessera ingest --cloud`'s
    // enqueue) to each cloud (loaded lazily, per stack); only the CLI (cli/) reaches it, never a backend.
    // And one shared adapter folder: functions/postgres/ (PostgreSQL manifest, PostGIS sink) serves the local
    // backend and every cloud alike, since a PostgreSQL server is reachable from each; it is checked below to
    // import no backend itself. So does functions/otel/ (the OpenTelemetry SDK every wiring file sets up when
    // OTEL_* variables ask for it, docs/telemetry.md): it imports the core's telemetry port and nothing else here.
    const allowed = (from: string | undefined, to: string) => from === 'verify' || to === 'postgres' || to === 'otel';
    const bad = functions.flatMap(importsOf).filter((i) => {
      const from = i.file.split('/')[1];
      const to = i.target?.startsWith('functions/') ? i.target.split('/')[1] : undefined;
      return to !== undefined && to !== from && !allowed(from, to);
    });
    expect(bad).toEqual([]);
  });

  it('functions/ never imports infra/ or cli/: the runtimes need no Pulumi program and no command line', () => {
    // The cross-cloud commands (choose, verify, preflight, ingest --cloud) read stack files and run the Pulumi
    // program under mocks: they live in cli/, which may import infra/.
    const bad = functions.flatMap(importsOf).filter((i) => i.target?.startsWith('infra/') || i.target?.startsWith('cli/'));
    expect(bad).toEqual([]);
  });

  it('cli/ imports only cli/, functions/, infra/ and shared/, and nothing but tests imports cli/', () => {
    expect(cli).toContain('cli/main.ts');
    const layers = ['cli/', 'functions/', 'infra/', 'shared/'];
    const outward = cli.flatMap(importsOf).filter((i) => i.target !== undefined && !layers.some((l) => i.target?.startsWith(l)));
    expect(outward).toEqual([]);
    const intoCli = [...shared, ...functions, ...infra].flatMap(importsOf).filter((i) => i.target?.startsWith('cli/'));
    expect(intoCli).toEqual([]);
  });

  it('functions/postgres/ imports no backend folder and no cloud SDK: only the pg driver and the core', () => {
    const postgres = functions.filter((f) => f.startsWith('functions/postgres/'));
    expect(postgres).toContain('functions/postgres/postgres-manifest-store.ts');
    const bad = postgres
      .flatMap(importsOf)
      .filter(
        (i) =>
          (i.target?.startsWith('functions/') && !i.target.startsWith('functions/postgres/')) ||
          /^(@aws-sdk|@google-cloud|@azure|node:sqlite)/.test(i.spec),
      );
    expect(bad).toEqual([]);
  });

  it('infra/ never imports functions/ code (it packages their build output)', () => {
    const bad = infra.flatMap(importsOf).filter((i) => i.target?.startsWith('functions/'));
    expect(bad).toEqual([]);
  });

  it('no import cycles among cli/ files, type-only imports included (a shared type gets its own file, as cli/io.ts)', () => {
    expect(importCycles(cli)).toEqual([]);
    // The check finds a cycle when there is one: the CliIo circle cli/io.ts replaced (main.ts <-> every command).
    expect(importCycles(cli, [['cli/io.ts', 'cli/main.ts']])).toContainEqual(expect.arrayContaining(['cli/io.ts', 'cli/main.ts']));
  });

  it('no new import cycle anywhere else: the circles left are these, each to be broken as the CliIo one was', () => {
    const known = [
      ['functions/aws/adapters/dynamodb-claim-store.ts', 'functions/aws/adapters/dynamodb-table.ts'],
      ['infra/common/config.ts', 'infra/common/naming.ts'],
      ['shared/raster/crs.ts', 'shared/raster/georeferencing.ts'],
    ];
    const unknown = importCycles([...shared, ...functions, ...infra, ...cli]).filter(
      (cycle) => !known.some((k) => k.join() === cycle.join()),
    );
    expect(unknown).toEqual([]);
  });

  it('nothing evaluates code from strings', () => {
    const offenders = [...shared, ...functions, ...cli].filter((f) =>
      /\beval\s*\(|new Function\s*\(/.test(readFileSync(join(root, f), 'utf8')),
    );
    expect(offenders).toEqual([]);
  });
});
