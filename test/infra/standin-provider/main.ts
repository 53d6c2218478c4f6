import { readFileSync } from 'node:fs';
import { main } from '@pulumi/pulumi/provider';
import { STANDIN_PLUGINS, type StandinPlugin, standinProvider } from './provider.js';

/**
 * `main.ts <plugin> <engine address> [flags]`: serves the stand-in for one provider plugin. Started by the
 * launchers in bin/ (`pulumi-resource-<plugin>`), which the engine finds on PATH. The version it reports is
 * the one of the SDK package installed for that plugin, the version the program's resources ask for.
 */

const plugin = process.argv[2] ?? '';
if (!Object.hasOwn(STANDIN_PLUGINS, plugin)) {
  console.error(
    `[standin-provider] usage: main.ts <${Object.keys(STANDIN_PLUGINS).join('|')}> <engine address>; got ${JSON.stringify(plugin)}`,
  );
  process.exit(2);
}
const pkg = STANDIN_PLUGINS[plugin as StandinPlugin];
const manifest = new URL(`../../../node_modules/${pkg}/package.json`, import.meta.url);
const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string };
await main(standinProvider(version), process.argv.slice(3));
