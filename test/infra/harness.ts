import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as pulumi from '@pulumi/pulumi';
import { ZipFile } from 'yazl';
import { ARCHIVES } from '../../infra/common/packaging.js';
import { type MockRun, type RecordedResource, runProgramUnderMocks } from '../../infra/preflight/mock-run.js';

/**
 * Runs the infra program (infra/index.ts) against Pulumi mocks and records
 * every resource it declares, with its resolved inputs and the dependencies
 * the SDK registered it with, so tests can assert policies ("every queue has
 * a dead-letter path", "the scene function is created after its trigger's
 * grants") rather than snapshots. The mocks themselves live in
 * infra/preflight/mock-run.ts, shared with `tessera preflight`.
 */

export { ACCOUNT_ID, AZURE_SUBSCRIPTION, declaredUrns, GCP_PROJECT_NUMBER, type RecordedResource } from '../../infra/preflight/mock-run.js';

export type StackRun = MockRun;

let archiveDir: string | undefined;

/**
 * A folder with a tiny stand-in for every archive build:functions writes, so
 * the infra tests need no build. Shared by the tests of one process.
 */
export async function placeholderArchives(): Promise<string> {
  if (archiveDir) return archiveDir;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-archives-'));
  const paths = [...Object.values(ARCHIVES.aws), ARCHIVES.gcp, ARCHIVES.azure];
  for (const rel of paths) {
    const zip = new ZipFile();
    zip.addBuffer(Buffer.from('export const handler = async () => {};\n'), 'index.mjs', { mtime: new Date('2020-01-01T00:00:00Z') });
    zip.end();
    const chunks: Buffer[] = [];
    for await (const c of zip.outputStream) chunks.push(c as Buffer);
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), Buffer.concat(chunks));
  }
  archiveDir = dir;
  return dir;
}

/**
 * Run the program for one stack. `config` is the flat map Pulumi passes a
 * program (`tessera:cloud` -> `aws`); `tessera:archiveDir` defaults to the
 * placeholder archives.
 */
export async function runStack(stack: string, config: Readonly<Record<string, string>>): Promise<StackRun> {
  return runProgramUnderMocks(stack, { 'tessera:archiveDir': await placeholderArchives(), ...config });
}

/**
 * The resources among `needed` that the engine is not made to create before
 * `resource`: neither a dependency of it nor of its dependencies, transitively.
 * Empty when `resource` cannot be created before every one of them exists.
 *
 * @example
 * expect(missingBefore(run, sceneFunction, [receiverGrant, publisherGrant])).toEqual([])
 */
export function missingBefore(run: StackRun, resource: RecordedResource, needed: readonly RecordedResource[]): string[] {
  const before = new Set(run.createdBefore(resource).map((r) => r.urn));
  return needed.filter((n) => !before.has(n.urn)).map((n) => n.name);
}

/** Run the program expecting it to refuse the configuration; returns the error message. */
export async function refusal(stack: string, config: Readonly<Record<string, string>>): Promise<string> {
  try {
    await runStack(stack, config);
  } catch (e) {
    await pulumi.runtime.disconnect().catch(() => undefined);
    return e instanceof Error ? e.message : String(e);
  }
  throw new Error(`stack ${stack} was accepted, but a refusal was expected`);
}

/** The environment variables of a function-like resource, flattened to strings. */
export function envOf(vars: unknown): Record<string, string> {
  return Object.fromEntries(Object.entries((vars ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
}
