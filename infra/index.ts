import { readStackConfig } from './common/config.js';
import { DEFAULT_ARCHIVE_DIR } from './common/packaging.js';
import { fromStackConfig } from './components/args.js';

/**
 * The Tessera Pulumi program. One program, one stack per cloud and region
 * (`Pulumi.<cloud>-<region>.yaml`): `tessera:cloud` picks the component.
 *
 * It is one consumer of the components a user imports into their own program
 * (infra/components/, `tessera/pulumi`): it validates the stack file with the
 * same validation as the components' args (infra/common/config.ts) and hands
 * the result to the cloud's component, named `tessera`.
 *
 * Each cloud's component is imported only when its stack asks for it, so a
 * stack (and a test) loads one cloud's SDK, not three.
 *
 * Pulumi calls the default export and publishes what it returns as the stack
 * outputs. It must stay the only export: Pulumi refuses a module with both.
 */
export default async function main(): Promise<Record<string, unknown>> {
  const cfg = readStackConfig(DEFAULT_ARCHIVE_DIR);
  switch (cfg.cloud) {
    case 'aws': {
      const { TesseraAws } = await import('./components/aws.js');
      return { ...new TesseraAws('tessera', fromStackConfig(cfg)).outputs };
    }
    case 'gcp': {
      const { TesseraGcp } = await import('./components/gcp.js');
      return { ...new TesseraGcp('tessera', fromStackConfig(cfg)).outputs };
    }
    case 'azure': {
      const { TesseraAzure } = await import('./components/azure.js');
      return { ...new TesseraAzure('tessera', fromStackConfig(cfg)).outputs };
    }
  }
}
