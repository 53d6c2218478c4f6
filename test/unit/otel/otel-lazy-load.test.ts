import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const exec = promisify(execFile);

/** The packages functions/otel/otel-sdk.ts loads (and theirs); the API (and @opentelemetry/core, which cloud SDKs load too) aside. */
const SDK_PACKAGES = [
  'sdk-trace-node',
  'sdk-trace-base',
  'sdk-metrics',
  'resources',
  'exporter-trace-otlp-http',
  'exporter-metrics-otlp-http',
  'otlp-exporter-base',
  'otlp-transformer',
];

/**
 * Imports the wiring files in a fresh Node process (through tsx, as the tests and `npm run tessera` load them) and
 * counts the files of the SDK's packages, and of the API, that Node's CommonJS loader holds: they are CommonJS, so each
 * file loaded is there.
 */
async function loadedOtelFiles(files: readonly string[], otel: Record<string, string>): Promise<{ sdk: number; api: number }> {
  const script = `import { createRequire } from 'node:module';
for (const f of ${JSON.stringify(files.map((f) => join(ROOT, f)))}) await import(f);
const loaded = Object.keys(createRequire(import.meta.url).cache);
const of = (pkgs) => loaded.filter((k) => pkgs.some((p) => k.includes(\`/@opentelemetry/\${p}/\`))).length;
console.log(JSON.stringify({ sdk: of(${JSON.stringify(SDK_PACKAGES)}), api: of(['api']) }));`;
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  const { stdout } = await exec(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    env: { ...env, ...otel },
  });
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { sdk: number; api: number };
}

describe('the wiring files load the OpenTelemetry SDK only when OTEL_* variables ask for it', { timeout: 60_000 }, () => {
  it('the cloud and local wiring files, imported without OTEL_* variables, load none of the SDK (the API only)', async () => {
    const loaded = await loadedOtelFiles(
      ['functions/aws/compose.ts', 'functions/gcp/compose.ts', 'functions/azure/compose.ts', 'functions/local/compose.ts'],
      {},
    );
    expect(loaded.sdk).toBe(0);
    expect(loaded.api).toBeGreaterThan(0);
  });

  it('a wiring file imported with OTEL_TRACES_EXPORTER set loads the SDK before composing', async () => {
    const loaded = await loadedOtelFiles(['functions/aws/compose.ts'], { OTEL_TRACES_EXPORTER: 'console' });
    expect(loaded.sdk).toBeGreaterThan(100);
  });
});
