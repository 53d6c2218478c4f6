import * as pulumi from '@pulumi/pulumi';
import { canonicalJson } from '../../shared/domain/canonical-json.js';
import { type Platform, resolveLease } from '../../shared/domain/ceilings.js';
import { assertNever } from '../../shared/domain/claim.js';
import { outputKeys } from '../../shared/domain/job-key.js';
import { AREAS } from '../../shared/domain/key-layout.js';
import { ENV, KEY_VAULT_REFERENCE_PREFIX } from '../../shared/domain/runtime-config.js';
import type { StackConfig } from './config.js';

/**
 * The prefixes of the output bucket, one per writer. They come from
 * shared/domain/job-key.ts (outputKeys); a unit test keeps the two in step.
 * IAM grants each function write access to its own prefix only.
 */
export const OUTPUT_PREFIXES = {
  tiles: AREAS.tiles.prefix,
  scenes: AREAS.scenes.prefix,
  mosaics: AREAS.mosaics.prefix,
} as const;

/** Keys a tile write notification must match to be worth a mosaic attempt. */
export const TILE_OBJECT_SUFFIX = '.tif';

/** True when the prefixes above are the ones outputKeys produces (checked by test/infra). */
export function outputPrefixesMatchDomain(): boolean {
  const w = { row: 0, col: 0 };
  return (
    outputKeys.tile('k', w).startsWith(OUTPUT_PREFIXES.tiles) &&
    outputKeys.tile('k', w).endsWith(TILE_OBJECT_SUFFIX) &&
    outputKeys.sceneManifest('k').startsWith(OUTPUT_PREFIXES.scenes) &&
    outputKeys.mosaic('k').startsWith(OUTPUT_PREFIXES.mosaics)
  );
}

/** The resources of this stack a function talks to, as the cloud names them. */
export interface RuntimeResources {
  /** DynamoDB table / Firestore collection / Azure table. */
  readonly claimsTable: pulumi.Input<string>;
  readonly sourceBucket: pulumi.Input<string>;
  readonly outputBucket: pulumi.Input<string>;
  /** SQS queue URL / Pub/Sub topic name / Azure queue name. */
  readonly tileQueue: pulumi.Input<string>;
  /** SQS DLQ URL / Pub/Sub dead-letter topic name / Azure poison queue name. */
  readonly deadLetterQueue: pulumi.Input<string>;
  readonly azureStorageAccount?: pulumi.Input<string>;
  readonly gcpProject?: pulumi.Input<string>;
  /** GCP: the Firestore database id; omitted for `(default)`. */
  readonly firestoreDatabase?: pulumi.Input<string>;
  /**
   * Deliveries before the queue or subscription that triggers this function dead-letters a message
   * (SQS maxReceiveCount, Pub/Sub maxDeliveryAttempts): the handler's redelivery schedule
   * (shared/app/redelivery.ts) reads it. Omitted where the trigger has no such count (a schedule,
   * Eventarc) or the runtime reads the host's own setting (Azure maxDequeueCount).
   */
  readonly maxDeliveries?: number;
  /** The ingest manifest (DynamoDB table / Firestore collection / Azure table): the ingest and reconcile functions. */
  readonly manifestTable?: pulumi.Input<string>;
  /** The ingest queue (SQS URL / Pub/Sub topic / Azure queue name): the ingest function. */
  readonly ingestQueue?: pulumi.Input<string>;
  /** Where the tile function finds the PostGIS feature sink URL (tessera:featureSinkUrl); never the URL itself. */
  readonly featureSink?: FeatureSinkReference;
}

/**
 * Where a function finds the PostGIS sink URL, which is a credential: a Pulumi secret only protects the state, and a
 * function's configuration is readable by anyone allowed to read the function. So the environment holds a pointer
 * into the cloud's secret store, and only the reading function's identity may follow it (docs/postgis.md).
 * GCP has no variant: the platform itself fills TESSERA_FEATURE_SINK from Secret Manager
 * (serviceConfig.secretEnvironmentVariables in infra/gcp/tiling-stack.ts), outside this environment.
 */
export type FeatureSinkReference =
  /** The secret's ARN and the version the stack wrote: the tile function reads it at cold start. */
  | { readonly kind: 'aws-secrets-manager'; readonly secretArn: pulumi.Input<string>; readonly versionId: pulumi.Input<string> }
  /** A Key Vault secret URI (with its version): the Functions platform resolves the reference as the app's keyVaultReferenceIdentity. */
  | { readonly kind: 'azure-key-vault'; readonly secretUri: pulumi.Input<string> };

/**
 * A function's environment, keyed by the names in shared/domain/runtime-config.ts
 * (ENV), which is also what the handlers parse with parseRuntimeConfig: infra
 * and functions cannot disagree on a variable name.
 *
 * @param platform the platform of *this* function (the scene trigger of a GCP
 *   stack is event-driven even when its tile worker is HTTP-triggered).
 * @param timeoutSec this function's configured timeout.
 */
export function functionEnvironment(
  cfg: StackConfig,
  platform: Platform,
  timeoutSec: number,
  resources: RuntimeResources,
): Record<string, pulumi.Input<string>> {
  // Every function's runtime validates its lease against its own platform's ceiling (parseRuntimeConfig).
  // Only the tile worker claims; a function on another platform (GCP's HTTP mosaic sweep, 3,600 s ceiling)
  // gets a lease that is valid there, never shorter than the tile worker's.
  const leaseSec =
    platform === cfg.platform
      ? cfg.lease.leaseSec
      : Math.max(cfg.lease.leaseSec, resolveLease({ platform, functionTimeoutSec: timeoutSec }).leaseSec);
  const env: Record<string, pulumi.Input<string>> = {
    [ENV.platform]: platform,
    [ENV.claimsTable]: resources.claimsTable,
    [ENV.sourceBucket]: resources.sourceBucket,
    [ENV.outputBucket]: resources.outputBucket,
    [ENV.tileQueue]: resources.tileQueue,
    [ENV.deadLetterQueue]: resources.deadLetterQueue,
    [ENV.sourcePrefix]: cfg.source.prefix,
    [ENV.sourceSuffix]: cfg.source.suffix,
    [ENV.functionTimeoutSeconds]: String(timeoutSec),
    [ENV.leaseSeconds]: String(leaseSec),
    [ENV.retentionSeconds]: String(cfg.retentionSec),
    [ENV.params]: canonicalJson(cfg.params),
  };
  if (resources.azureStorageAccount !== undefined) env[ENV.azureStorageAccount] = resources.azureStorageAccount;
  if (resources.gcpProject !== undefined) env[ENV.gcpProject] = resources.gcpProject;
  if (resources.firestoreDatabase !== undefined) env[ENV.firestoreDatabase] = resources.firestoreDatabase;
  if (resources.maxDeliveries !== undefined) env[ENV.maxDeliveries] = String(resources.maxDeliveries);
  if (resources.manifestTable !== undefined) env[ENV.manifestTable] = resources.manifestTable;
  if (resources.ingestQueue !== undefined) env[ENV.ingestQueue] = resources.ingestQueue;
  // A STAC stack: its scene trigger reads each item and picks these assets (shared/app/stac-scene.ts).
  if (cfg.stacAssets !== undefined) env[ENV.stacAssets] = canonicalJson(cfg.stacAssets);
  // Where the ingest function's http(s) hrefs may go (shared/app/ingest.ts); the private-address opt-in is never deployed.
  if (cfg.ingestAllowedHosts !== undefined) env[ENV.ingestAllowedHosts] = cfg.ingestAllowedHosts.join(',');
  const sink = resources.featureSink;
  switch (sink?.kind) {
    case undefined:
      break;
    case 'aws-secrets-manager':
      env[ENV.featureSinkSecret] = sink.secretArn;
      env[ENV.featureSinkSecretVersion] = sink.versionId;
      break;
    case 'azure-key-vault':
      env[ENV.featureSink] = pulumi.interpolate`${KEY_VAULT_REFERENCE_PREFIX}SecretUri=${sink.secretUri})`;
      break;
    default:
      assertNever(sink, 'feature sink reference');
  }
  return env;
}
