import * as pulumi from '@pulumi/pulumi';
import { AwsTilingStack } from '../aws/tiling-stack.js';
import type { AwsStackConfig } from '../common/config.js';
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

/** Args of {@link TesseraAws}: the common ones and AWS's own. */
export interface TesseraAwsArgs extends TesseraArgs {
  /**
   * Most tile functions the SQS event source runs at once (`scalingConfig.maximumConcurrency`, 2-1000); keep it within the account's Lambda concurrency.
   * @defaultValue 100
   */
  readonly tileMaxConcurrency?: number | undefined;
}

/** Every arg of {@link TesseraAwsArgs} and the setting it is. */
export const AWS_ARGS = { ...COMMON_ARGS, ...CLOUD_ARGS.aws } as const satisfies ArgSpecs<TesseraAwsArgs>;

/** What {@link TesseraAws} publishes: the stack outputs the repository's program gives an AWS stack. */
export interface TesseraAwsOutputs extends TesseraOutputs {
  readonly cloud: 'aws';
  readonly sourceBucket: pulumi.Output<string>;
  readonly outputBucket: pulumi.Output<string>;
  readonly claimsTable: pulumi.Output<string>;
  readonly tileQueueUrl: pulumi.Output<string>;
  readonly tileDeadLetterQueueUrl: pulumi.Output<string>;
  /** tessera verify re-delivers its scene's event through this queue (docs/deploy.md). */
  readonly sceneQueueUrl: pulumi.Output<string>;
  /** tessera ingest --cloud aws enqueues ingest requests here. */
  readonly ingestQueueUrl: pulumi.Output<string>;
  readonly ingestDeadLetterQueueUrl: pulumi.Output<string>;
  /** The ingest manifest the requests publish into. */
  readonly manifestTable: pulumi.Output<string>;
  readonly tileQueueVisibilitySeconds: number;
  readonly alarmTopic: pulumi.Output<string>;
  /** The managed policy `tessera verify` needs: attach it to the identity that runs it (docs/iam.md). */
  readonly verifyPolicyArn: pulumi.Output<string>;
}

/**
 * Tessera on AWS, as one component of your Pulumi program: S3 -> SQS -> Lambda (scene) -> SQS -> Lambda (tile) -> S3,
 * with DynamoDB claims, the mosaic sweep, ingestion, dead-letter queues and alarms (docs/deploy.md).
 *
 * Args are validated as `tessera preflight` validates a stack file; bad args throw {@link TesseraArgsError} naming
 * every problem and its fix, before any resource is registered. Function archives come from `archiveDir`.
 *
 * @example
 * import { TesseraAws } from 'tessera/pulumi';
 * const tiles = new TesseraAws('tiles', { region: 'eu-west-1', memoryMb: 4096 });
 * export const outputBucket = tiles.outputs.outputBucket;
 */
export class TesseraAws extends pulumi.ComponentResource {
  /** The Pulumi type token. */
  static readonly TYPE = componentType('aws');
  /** The validated configuration, defaults filled in. */
  readonly config: AwsStackConfig;
  /** The resources (buckets, queues, functions, ...), one component below this one. */
  readonly tiling: AwsTilingStack;
  /** What the component publishes (also its registered outputs). */
  readonly outputs: TesseraAwsOutputs;

  constructor(name: string, args: TesseraAwsArgs | ParsedStackConfig<AwsStackConfig> = {}, opts?: pulumi.ComponentResourceOptions) {
    const { config, archives, tags } = prepare('aws', name, args, AWS_ARGS, opts);
    super(TesseraAws.TYPE, name, {}, opts);
    this.config = config;
    // A stack deployed before the components existed had this component at the top (its URN without a parent):
    // the alias, which its children inherit, keeps every resource of such a stack in place.
    this.tiling = new AwsTilingStack(name, { config, archives, tags }, { parent: this, aliases: [{ parent: pulumi.rootStackResource }] });
    const stack = this.tiling;
    this.outputs = {
      ...commonOutputs(config),
      cloud: 'aws',
      sourceBucket: stack.sourceBucket.bucket,
      outputBucket: stack.outputBucket.bucket,
      claimsTable: stack.claimsTable.name,
      tileQueueUrl: stack.queues.tile.queue.url,
      tileDeadLetterQueueUrl: stack.queues.tile.deadLetter.url,
      sceneQueueUrl: stack.queues.scene.queue.url,
      ingestQueueUrl: stack.queues.ingest.queue.url,
      ingestDeadLetterQueueUrl: stack.queues.ingest.deadLetter.url,
      manifestTable: stack.manifestTable.name,
      tileQueueVisibilitySeconds: config.tileQueueVisibilitySec,
      alarmTopic: stack.alarmTopic.arn,
      verifyPolicyArn: stack.verifyPolicy.arn,
    };
    this.registerOutputs(this.outputs);
  }
}
