import * as pulumi from '@pulumi/pulumi';
import type { GcpStackConfig, GcpTileTrigger } from '../common/config.js';
import { GcpTilingStack, MANIFEST_COLLECTION } from '../gcp/tiling-stack.js';
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

/** Args of {@link TesseraGcp}: the common ones and Google Cloud's own. */
export interface TesseraGcpArgs extends TesseraArgs {
  /**
   * The project to deploy into.
   * @defaultValue the provider's project (`gcp:project`, or `GOOGLE_PROJECT`)
   */
  readonly project?: string | undefined;
  /**
   * How Pub/Sub starts the tile worker: `event` (platform `gcf2-event`, 540 s ceiling) or `http` (`gcf2-http`, 3,600 s).
   * @defaultValue `event`
   */
  readonly tileTrigger?: GcpTileTrigger | undefined;
  /**
   * Firestore collection holding the claim rows (the TTL policy is set on it).
   * @defaultValue `claims`
   */
  readonly claimsCollection?: string | undefined;
  /**
   * Firestore database of the claims, created by the component; `(default)` uses the project's existing default database.
   * @defaultValue `tessera-<stack>-<name>`
   */
  readonly firestoreDatabase?: string | undefined;
}

/** Every arg of {@link TesseraGcpArgs} and the setting it is. */
export const GCP_ARGS = { ...COMMON_ARGS, ...CLOUD_ARGS.gcp } as const satisfies ArgSpecs<TesseraGcpArgs>;

/** What {@link TesseraGcp} publishes: the stack outputs the repository's program gives a GCP stack. */
export interface TesseraGcpOutputs extends TesseraOutputs {
  readonly cloud: 'gcp';
  readonly project: string;
  readonly sourceBucket: pulumi.Output<string>;
  readonly outputBucket: pulumi.Output<string>;
  readonly claimsCollection: string;
  readonly tileTopic: pulumi.Output<string>;
  readonly deadLetterTopic: pulumi.Output<string>;
  /** tessera ingest --cloud gcp publishes ingest requests here. */
  readonly ingestTopic: pulumi.Output<string>;
  readonly ingestDeadLetterTopic: pulumi.Output<string>;
  readonly manifestCollection: string;
  readonly firestoreDatabase: string;
  readonly tileAckDeadlineSeconds: number;
  /** The account `tessera verify` runs as, by impersonation (docs/iam.md). */
  readonly verifyServiceAccount: pulumi.Output<string>;
}

/**
 * Tessera on Google Cloud, as one component of your Pulumi program: GCS -> Eventarc -> Cloud Functions (scene) ->
 * Pub/Sub -> Cloud Functions (tile) -> GCS, with Firestore claims, the mosaic sweep, ingestion, dead-letter topics
 * and alerts (docs/deploy.md).
 *
 * Args are validated as `tessera preflight` validates a stack file; bad args throw {@link TesseraArgsError} naming
 * every problem and its fix, before any resource is registered.
 *
 * @example
 * import { TesseraGcp } from 'tessera/pulumi';
 * const tiles = new TesseraGcp('tiles', { project: 'my-project', region: 'europe-west1' });
 * export const outputBucket = tiles.outputs.outputBucket;
 */
export class TesseraGcp extends pulumi.ComponentResource {
  /** The Pulumi type token. */
  static readonly TYPE = componentType('gcp');
  /** The validated configuration, defaults filled in. */
  readonly config: GcpStackConfig;
  /** The resources (buckets, topics, functions, ...), one component below this one. */
  readonly tiling: GcpTilingStack;
  /** What the component publishes (also its registered outputs). */
  readonly outputs: TesseraGcpOutputs;

  constructor(name: string, args: TesseraGcpArgs | ParsedStackConfig<GcpStackConfig> = {}, opts?: pulumi.ComponentResourceOptions) {
    const { config, archives, tags } = prepare('gcp', name, args, GCP_ARGS, opts);
    super(TesseraGcp.TYPE, name, {}, opts);
    this.config = config;
    // A stack deployed before the components existed had this component at the top: the alias, which its children
    // inherit, keeps every resource of such a stack in place.
    this.tiling = new GcpTilingStack(
      name,
      { config, archive: archives, tags },
      { parent: this, aliases: [{ parent: pulumi.rootStackResource }] },
    );
    const stack = this.tiling;
    this.outputs = {
      ...commonOutputs(config),
      cloud: 'gcp',
      project: config.project,
      sourceBucket: stack.sourceBucket.name,
      outputBucket: stack.outputBucket.name,
      claimsCollection: config.claimsCollection,
      tileTopic: stack.tileTopic.name,
      deadLetterTopic: stack.deadLetterTopic.name,
      ingestTopic: stack.ingestTopic.name,
      ingestDeadLetterTopic: stack.ingestDeadLetterTopic.name,
      manifestCollection: MANIFEST_COLLECTION,
      firestoreDatabase: config.firestoreDatabase,
      tileAckDeadlineSeconds: config.ackDeadlineSec,
      verifyServiceAccount: stack.serviceAccounts.verify.email,
    };
    this.registerOutputs(this.outputs);
  }
}
