import { readStackConfig } from '../../infra/common/config.js';
import { archivesFor, DEFAULT_ARCHIVE_DIR } from '../../infra/common/packaging.js';
import { standardTags } from '../../infra/common/tags.js';

/**
 * The repository's program as it was before the components (infra/components/): the cloud's tiling stack at the
 * top of the stack, named `tessera`, with the same configuration, archives and tags. The components test compares
 * what it declares with what infra/index.ts declares now (under mocks); the engine test deploys a stack with it and
 * previews the current program on that stack (the aliases at work).
 */
export default async function formerProgram(): Promise<Record<string, unknown>> {
  const cfg = readStackConfig(DEFAULT_ARCHIVE_DIR);
  const tags = standardTags(cfg.stack, cfg.cloud);
  switch (cfg.cloud) {
    case 'aws': {
      const { AwsTilingStack } = await import('../../infra/aws/tiling-stack.js');
      new AwsTilingStack('tessera', { config: cfg, archives: archivesFor('aws', cfg.archiveDir), tags });
      break;
    }
    case 'gcp': {
      const { GcpTilingStack } = await import('../../infra/gcp/tiling-stack.js');
      new GcpTilingStack('tessera', { config: cfg, archive: archivesFor('gcp', cfg.archiveDir), tags });
      break;
    }
    case 'azure': {
      const { AzureTilingStack } = await import('../../infra/azure/tiling-stack.js');
      new AzureTilingStack('tessera', { config: cfg, archive: archivesFor('azure', cfg.archiveDir), tags });
      break;
    }
  }
  return {};
}
