import * as pulumi from '@pulumi/pulumi';
import { AzureTilingStack, CLAIMS_TABLE, CONTAINERS, MANIFEST_TABLE } from '../azure/tiling-stack.js';
import type { AzurePlan, AzureStackConfig } from '../common/config.js';
import { AZURE_QUEUES, azurePoisonQueue } from '../common/packaging.js';
import {
  type ArgSpecs,
  CLOUD_ARGS,
  COMMON_ARGS,
  commonOutputs,
  componentType,
  type ParsedStackConfig,
  prepare,
  type TesseraArgs,
  type TesseraOutputs,
} from './args.js';

/** Args of {@link TesseraAzure}: the common ones and Azure's own. */
export interface TesseraAzureArgs extends TesseraArgs {
  /**
   * The Functions plan: `consumption` or `flex` (platforms `azure-consumption`, `azure-flex`); Flex covers jobs longer than 10 minutes.
   * @defaultValue `consumption`
   */
  readonly plan?: AzurePlan | undefined;
  /**
   * The data account's name (3-24 lowercase letters and digits), to override when the derived global name is taken.
   * @defaultValue `tsr` + 12 hex digits derived from organization, project, stack and name
   */
  readonly storageAccountName?: string | undefined;
}

/** Every arg of {@link TesseraAzureArgs} and the setting it is. */
export const AZURE_ARGS = { ...COMMON_ARGS, ...CLOUD_ARGS.azure } as const satisfies ArgSpecs<TesseraAzureArgs>;

/** What {@link TesseraAzure} publishes: the stack outputs the repository's program gives an Azure stack. */
export interface TesseraAzureOutputs extends TesseraOutputs {
  readonly cloud: 'azure';
  readonly plan: AzurePlan;
  readonly resourceGroup: pulumi.Output<string>;
  readonly storageAccount: pulumi.Output<string>;
  /** The Functions host's own account (AzureWebJobsStorage) and the package; no data in it. */
  readonly hostStorageAccount: pulumi.Output<string>;
  readonly functionApp: pulumi.Output<string>;
  readonly tileQueue: string;
  /** What tessera verify reads and writes (docs/deploy.md): the data account's containers, table and scene queue. */
  readonly sourceContainer: string;
  readonly outputContainer: string;
  readonly claimsTable: string;
  readonly sceneQueue: string;
  readonly poisonQueue: string;
  /** tessera ingest --cloud azure puts ingest requests here. */
  readonly ingestQueue: string;
  readonly ingestPoisonQueue: string;
  readonly manifestTable: string;
  /** After `pulumi up`: Flex needs its package pushed; Consumption needs its triggers synced (docs/deploy.md). */
  readonly nextStep: pulumi.Output<string>;
  /** The identity `tessera verify` runs as, from CI through a federated credential (docs/iam.md). */
  readonly verifyIdentityClientId: pulumi.Output<string>;
}

/**
 * Tessera on Azure, as one component of your Pulumi program: Blob Storage -> Event Grid -> Storage Queue -> Functions
 * (scene) -> Storage Queue -> Functions (tile) -> Blob Storage, with Table Storage claims, the mosaic sweep,
 * ingestion, poison queues and alerts (docs/deploy.md).
 *
 * Args are validated as `tessera preflight` validates a stack file; bad args throw {@link TesseraArgsError} naming
 * every problem and its fix, before any resource is registered.
 *
 * @example
 * import { TesseraAzure } from 'tessera/pulumi';
 * const tiles = new TesseraAzure('tiles', { region: 'westeurope', plan: 'flex' });
 * export const nextStep = tiles.outputs.nextStep;
 */
export class TesseraAzure extends pulumi.ComponentResource {
  /** The Pulumi type token. */
  static readonly TYPE = componentType('azure');
  /** The validated configuration, defaults filled in. */
  readonly config: AzureStackConfig;
  /** The resources (resource group, accounts, function app, ...), one component below this one. */
  readonly tiling: AzureTilingStack;
  /** What the component publishes (also its registered outputs). */
  readonly outputs: TesseraAzureOutputs;

  constructor(name: string, args: TesseraAzureArgs | ParsedStackConfig<AzureStackConfig> = {}, opts?: pulumi.ComponentResourceOptions) {
    const { config, archives, tags } = prepare('azure', name, args, AZURE_ARGS, opts);
    super(TesseraAzure.TYPE, name, {}, opts);
    this.config = config;
    // A stack deployed before the components existed had this component at the top: the alias, which its children
    // inherit, keeps every resource of such a stack in place.
    this.tiling = new AzureTilingStack(
      name,
      { config, archive: archives, tags },
      { parent: this, aliases: [{ parent: pulumi.rootStackResource }] },
    );
    const stack = this.tiling;
    this.outputs = {
      ...commonOutputs(config),
      cloud: 'azure',
      plan: config.plan,
      resourceGroup: stack.resourceGroup.name,
      storageAccount: stack.storageAccount.name,
      hostStorageAccount: stack.hostStorageAccount.name,
      functionApp: stack.functionApp.name,
      tileQueue: stack.tileQueueName,
      sourceContainer: CONTAINERS.sources,
      outputContainer: CONTAINERS.outputs,
      claimsTable: CLAIMS_TABLE,
      sceneQueue: AZURE_QUEUES.scene,
      poisonQueue: stack.poisonQueueName,
      ingestQueue: AZURE_QUEUES.ingest,
      ingestPoisonQueue: azurePoisonQueue(AZURE_QUEUES.ingest),
      manifestTable: MANIFEST_TABLE,
      nextStep: config.plan === 'flex' ? stack.deployCommand : stack.syncTriggersCommand,
      verifyIdentityClientId: stack.roleIdentities.verify.clientId,
    };
    this.registerOutputs(this.outputs);
  }
}
