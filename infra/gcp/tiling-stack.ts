import * as cloudfunctionsv2 from '@pulumi/gcp/cloudfunctionsv2';
import * as cloudrunv2 from '@pulumi/gcp/cloudrunv2';
import * as cloudscheduler from '@pulumi/gcp/cloudscheduler';
import * as firestore from '@pulumi/gcp/firestore';
import * as logging from '@pulumi/gcp/logging';
import * as monitoring from '@pulumi/gcp/monitoring';
import * as organizations from '@pulumi/gcp/organizations';
import * as projects from '@pulumi/gcp/projects';
import * as pubsub from '@pulumi/gcp/pubsub';
import * as serviceaccount from '@pulumi/gcp/serviceaccount';
import * as storage from '@pulumi/gcp/storage';
import * as pulumi from '@pulumi/pulumi';
import type { Platform } from '../../shared/domain/ceilings.js';
import {
  FUNCTION_ROLES,
  type FunctionRole,
  type GcpStackConfig,
  SUPPORT_FUNCTION_MEMORY_MB,
  SUPPORT_FUNCTION_TIMEOUT_SEC,
} from '../common/config.js';
import { functionEnvironment, OUTPUT_PREFIXES } from '../common/environment.js';
import { gcpServiceAccountId, monitoringPrefix } from '../common/naming.js';
import { type Archive, GCP_ENTRY_POINTS } from '../common/packaging.js';
import { gcpLabels, type StandardTags } from '../common/tags.js';

export interface GcpTilingStackArgs {
  readonly config: GcpStackConfig;
  readonly archive: Archive;
  readonly tags: StandardTags;
}

/** APIs the stack uses; enabling them is idempotent and they stay on when the stack is destroyed. */
export const GCP_SERVICES = [
  'artifactregistry.googleapis.com',
  'cloudbuild.googleapis.com',
  'cloudfunctions.googleapis.com',
  'cloudscheduler.googleapis.com',
  'eventarc.googleapis.com',
  'firestore.googleapis.com',
  'logging.googleapis.com',
  'monitoring.googleapis.com',
  'pubsub.googleapis.com',
  'run.googleapis.com',
  'storage.googleapis.com',
] as const;

const STORAGE_FINALIZED = 'google.cloud.storage.object.v1.finalized';
/**
 * How often Cloud Scheduler asks the mosaic function to sweep: assemble every
 * scene with a manifest and no mosaic (as on AWS). A failed run is not
 * retried; the next run is the retry.
 */
export const MOSAIC_SCHEDULE = '*/5 * * * *';
const RETENTION = '604800s'; // 7 days: Pub/Sub's default, time to inspect dead letters
/** Pub/Sub's own retry backoff bounds (10-600 s), widest spread: a throttled store gets time to recover. */
const RETRY_BACKOFF = { minimumBackoff: '10s', maximumBackoff: '600s' };
/** Matches the JSON lines JsonTelemetry writes for a commit whose lease was stolen (Cloud Run puts them in jsonPayload). */
export const LEASE_STOLEN_LOG_FILTER = 'jsonPayload.event="lease-stolen" AND jsonPayload.level="ERROR"';

/**
 * Cloud Functions 2nd gen memory and the CPU it needs: one vCPU serves up to
 * 4 GiB, two up to 8 GiB, four up to 16 GiB, eight up to 32 GiB.
 */
export function gcfCpuFor(memoryMb: number): string {
  if (memoryMb <= 4096) return '1';
  if (memoryMb <= 8192) return '2';
  if (memoryMb <= 16_384) return '4';
  return '8';
}

/** An IAM condition limiting an object role to one prefix of one bucket. */
function underPrefix(bucket: pulumi.Input<string>, prefix: string, title: string): storage.BucketIAMMemberArgs['condition'] {
  return {
    title,
    expression: pulumi.interpolate`resource.name.startsWith("projects/_/buckets/${bucket}/objects/${prefix}")`,
  };
}

/**
 * Tessera on GCP: GCS finalize -> Eventarc -> scene function -> Pub/Sub ->
 * push subscription (dead-letter topic, retry policy) -> tile function -> GCS,
 * with Firestore claims (TTL on expires_at), and a Cloud Scheduler job that
 * has the mosaic function (HTTP) sweep finished scenes every five minutes.
 *
 * The tile trigger is a push subscription this stack owns, not the one
 * Eventarc would create, because only an owned subscription can carry a
 * dead-letter policy and retry policy in code. `tessera:gcpTileTrigger`
 * chooses the timeout ceiling the tile worker runs under (event: 540 s,
 * which the 600 s push deadline covers; http: up to 3,600 s).
 */
export class GcpTilingStack extends pulumi.ComponentResource {
  readonly sourceBucket: storage.Bucket;
  readonly outputBucket: storage.Bucket;
  readonly tileTopic: pubsub.Topic;
  readonly deadLetterTopic: pubsub.Topic;
  readonly tileSubscription: pubsub.Subscription;
  readonly functions: Readonly<Record<FunctionRole, cloudfunctionsv2.Function>>;
  readonly serviceAccounts: Readonly<Record<FunctionRole | 'trigger', serviceaccount.Account>>;

  constructor(name: string, args: GcpTilingStackArgs, opts?: pulumi.ComponentResourceOptions) {
    super('tessera:gcp:TilingStack', name, {}, opts);
    const { config: cfg, archive } = args;
    const labels = gcpLabels(args.tags);
    const parent = { parent: this };
    const project = cfg.project;
    const projectInfo = organizations.getProjectOutput({ projectId: project }, parent);
    const storageAgent = storage.getProjectServiceAccountOutput({ project }, parent);
    const pubsubAgent = pulumi.interpolate`serviceAccount:service-${projectInfo.number}@gcp-sa-pubsub.iam.gserviceaccount.com`;

    const services = GCP_SERVICES.map(
      (service) => new projects.Service(`${name}-${service.split('.')[0]}`, { project, service, disableOnDestroy: false }, parent),
    );
    const afterApis = { parent: this, dependsOn: services };

    // Buckets: uniform access, public access prevention enforced (Google-managed encryption is always on).
    const bucket = (what: string, versioned: boolean): storage.Bucket =>
      new storage.Bucket(
        `${name}-${what}`,
        {
          project,
          location: cfg.region.toUpperCase(),
          uniformBucketLevelAccess: true,
          publicAccessPrevention: 'enforced',
          ...(versioned
            ? {
                versioning: { enabled: true },
                // Repair writes leave the replaced generation behind; keep it a month.
                lifecycleRules: [{ action: { type: 'Delete' }, condition: { daysSinceNoncurrentTime: 30, withState: 'ARCHIVED' } }],
              }
            : {}),
          labels,
        },
        afterApis,
      );
    this.sourceBucket = bucket('sources', false);
    this.outputBucket = bucket('outputs', true);
    const artifacts = bucket('artifacts', false);
    const sourceObject = new storage.BucketObject(
      `${name}-source`,
      // Named by content: a new build is a new object, which redeploys the functions.
      {
        bucket: artifacts.name,
        name: `functions/source-${archive.sha256.slice(0, 16)}.zip`,
        source: new pulumi.asset.FileAsset(archive.path),
      },
      parent,
    );

    // Claims: the (default) Firestore database, point-in-time recovery on, TTL on expires_at.
    const database = new firestore.Database(
      `${name}-firestore`,
      {
        project,
        name: '(default)',
        locationId: cfg.region,
        type: 'FIRESTORE_NATIVE',
        pointInTimeRecoveryEnablement: 'POINT_IN_TIME_RECOVERY_ENABLED',
        // A project has one (default) database and other stacks may share it: never delete it with a stack.
        deletionPolicy: 'ABANDON',
      },
      afterApis,
    );
    new firestore.Field(
      `${name}-claims-ttl`,
      {
        project,
        database: database.name,
        collection: cfg.claimsCollection,
        field: 'expires_at',
        ttlConfig: {},
        // A TTL timestamp that only grows makes a hot single-field index; claims are read by id only.
        indexConfig: {},
      },
      parent,
    );

    // Tile jobs: topic -> push subscription with a dead-letter topic and retry policy.
    this.tileTopic = new pubsub.Topic(`${name}-tiles`, { project, messageRetentionDuration: RETENTION, labels }, afterApis);
    this.deadLetterTopic = new pubsub.Topic(
      `${name}-tiles-dead-letter`,
      { project, messageRetentionDuration: RETENTION, labels },
      afterApis,
    );
    const deadLetterSubscription = new pubsub.Subscription(
      `${name}-tiles-dead-letter`,
      // Dead letters published to a topic without a subscription are lost: this one keeps them for inspection.
      { project, topic: this.deadLetterTopic.id, messageRetentionDuration: RETENTION, expirationPolicy: { ttl: '' }, labels },
      parent,
    );

    // One service account per function, plus one for the triggers (Eventarc and the push subscription).
    const accounts = {} as Record<FunctionRole | 'trigger', serviceaccount.Account>;
    for (const role of [...FUNCTION_ROLES, 'trigger'] as const) {
      accounts[role] = new serviceaccount.Account(
        `${name}-${role}`,
        { project, accountId: gcpServiceAccountId(cfg.stack, role), displayName: `Tessera ${cfg.stack} ${role}` },
        afterApis,
      );
    }
    this.serviceAccounts = accounts;
    const member = (role: FunctionRole | 'trigger') => accounts[role].member;
    const grantBucket = (
      id: string,
      b: storage.Bucket,
      role: string,
      who: FunctionRole,
      condition?: storage.BucketIAMMemberArgs['condition'],
    ) =>
      new storage.BucketIAMMember(
        `${name}-${id}`,
        { bucket: b.name, role, member: member(who), ...(condition ? { condition } : {}) },
        parent,
      );
    // scene: read sources, create scene manifests, publish tile jobs.
    grantBucket('scene-read-sources', this.sourceBucket, 'roles/storage.objectViewer', 'scene');
    grantBucket('scene-read-outputs', this.outputBucket, 'roles/storage.objectViewer', 'scene');
    grantBucket(
      'scene-write-manifests',
      this.outputBucket,
      'roles/storage.objectCreator',
      'scene',
      underPrefix(this.outputBucket.name, OUTPUT_PREFIXES.scenes, 'scene manifests only'),
    );
    new pubsub.TopicIAMMember(
      `${name}-scene-publish`,
      { project, topic: this.tileTopic.name, role: 'roles/pubsub.publisher', member: member('scene') },
      parent,
    );
    // tile: read sources, create and repair tiles, claim in Firestore, route poison to the dead-letter topic.
    grantBucket('tile-read-sources', this.sourceBucket, 'roles/storage.objectViewer', 'tile');
    grantBucket('tile-read-outputs', this.outputBucket, 'roles/storage.objectViewer', 'tile');
    // objectUser (create, and delete for a repair's replacement) limited to tiles/.
    grantBucket(
      'tile-write-tiles',
      this.outputBucket,
      'roles/storage.objectUser',
      'tile',
      underPrefix(this.outputBucket.name, OUTPUT_PREFIXES.tiles, 'tiles only'),
    );
    new projects.IAMMember(
      `${name}-tile-claims`,
      {
        project,
        role: 'roles/datastore.user',
        member: member('tile'),
        condition: {
          title: 'claims database only',
          expression: pulumi.interpolate`resource.name.startsWith("projects/${project}/databases/${database.name}")`,
        },
      },
      parent,
    );
    new pubsub.TopicIAMMember(
      `${name}-tile-dead-letter`,
      { project, topic: this.deadLetterTopic.name, role: 'roles/pubsub.publisher', member: member('tile') },
      parent,
    );
    // mosaic: read manifests and list tiles, create mosaics.
    grantBucket('mosaic-read-outputs', this.outputBucket, 'roles/storage.objectViewer', 'mosaic');
    grantBucket(
      'mosaic-write-mosaics',
      this.outputBucket,
      'roles/storage.objectCreator',
      'mosaic',
      underPrefix(this.outputBucket.name, OUTPUT_PREFIXES.mosaics, 'mosaics only'),
    );
    // Triggers (Eventarc, the push subscription, Cloud Scheduler) share one account; GCS publishes its events through Pub/Sub.
    new projects.IAMMember(
      `${name}-trigger-receiver`,
      { project, role: 'roles/eventarc.eventReceiver', member: member('trigger') },
      parent,
    );
    new projects.IAMMember(
      `${name}-gcs-agent-publisher`,
      { project, role: 'roles/pubsub.publisher', member: pulumi.interpolate`serviceAccount:${storageAgent.emailAddress}` },
      parent,
    );
    // Pub/Sub's own agent forwards undeliverable messages: it publishes to the dead-letter topic and acks the original.
    new pubsub.TopicIAMMember(
      `${name}-agent-dead-letter`,
      { project, topic: this.deadLetterTopic.name, role: 'roles/pubsub.publisher', member: pubsubAgent },
      parent,
    );

    // Functions.
    const timeouts: Record<FunctionRole, number> = {
      scene: SUPPORT_FUNCTION_TIMEOUT_SEC,
      tile: cfg.lease.functionTimeoutSec,
      mosaic: SUPPORT_FUNCTION_TIMEOUT_SEC,
    };
    const memory: Record<FunctionRole, number> = {
      scene: SUPPORT_FUNCTION_MEMORY_MB,
      tile: cfg.memoryMb,
      mosaic: SUPPORT_FUNCTION_MEMORY_MB,
    };
    // Scene is Eventarc-triggered (event-driven), mosaic is HTTP (Cloud Scheduler), the tile worker follows tessera:gcpTileTrigger.
    const platforms: Record<FunctionRole, Platform> = { scene: 'gcf2-event', tile: cfg.platform, mosaic: 'gcf2-http' };
    const triggers: Record<FunctionRole, storage.Bucket | undefined> = { scene: this.sourceBucket, tile: undefined, mosaic: undefined };
    const functions = {} as Record<FunctionRole, cloudfunctionsv2.Function>;
    for (const role of FUNCTION_ROLES) {
      const triggerBucket = triggers[role];
      functions[role] = new cloudfunctionsv2.Function(
        `${name}-${role}`,
        {
          project,
          location: cfg.region,
          description: `Tessera ${role} (${cfg.stack})`,
          buildConfig: {
            runtime: 'nodejs20',
            entryPoint: GCP_ENTRY_POINTS[role],
            source: { storageSource: { bucket: artifacts.name, object: sourceObject.name } },
          },
          serviceConfig: {
            availableMemory: `${memory[role]}M`,
            availableCpu: gcfCpuFor(memory[role]),
            timeoutSeconds: timeouts[role],
            // One job per instance: a tile holds a window and its COG encoder in memory.
            maxInstanceRequestConcurrency: 1,
            maxInstanceCount: role === 'tile' ? 100 : 10,
            serviceAccountEmail: accounts[role].email,
            // Eventarc and Pub/Sub push from this project count as internal traffic.
            ingressSettings: 'ALLOW_INTERNAL_ONLY',
            allTrafficOnLatestRevision: true,
            environmentVariables: {
              ...functionEnvironment(cfg, platforms[role], timeouts[role], {
                claimsTable: cfg.claimsCollection,
                sourceBucket: this.sourceBucket.name,
                outputBucket: this.outputBucket.name,
                tileQueue: this.tileTopic.name,
                deadLetterQueue: this.deadLetterTopic.name,
                gcpProject: project,
              }),
              NODE_OPTIONS: '--enable-source-maps',
            },
          },
          ...(triggerBucket
            ? {
                eventTrigger: {
                  triggerRegion: cfg.region,
                  eventType: STORAGE_FINALIZED,
                  // Eventarc filters storage events by bucket only: the handler applies TESSERA_SOURCE_PREFIX/SUFFIX.
                  eventFilters: [{ attribute: 'bucket', value: triggerBucket.name }],
                  retryPolicy: 'RETRY_POLICY_RETRY',
                  serviceAccountEmail: accounts.trigger.email,
                },
              }
            : {}),
          labels,
        },
        afterApis,
      );
      new cloudrunv2.ServiceIamMember(
        `${name}-${role}-invoker`,
        {
          project,
          location: cfg.region,
          name: functions[role].serviceConfig.apply((s) => s?.service ?? ''),
          role: 'roles/run.invoker',
          member: member('trigger'),
        },
        parent,
      );
    }
    this.functions = functions;

    this.tileSubscription = new pubsub.Subscription(
      `${name}-tiles`,
      {
        project,
        topic: this.tileTopic.id,
        ackDeadlineSeconds: cfg.ackDeadlineSec,
        messageRetentionDuration: RETENTION,
        retryPolicy: RETRY_BACKOFF,
        deadLetterPolicy: { deadLetterTopic: this.deadLetterTopic.id, maxDeliveryAttempts: cfg.maxReceiveCount },
        expirationPolicy: { ttl: '' },
        pushConfig: {
          // The functions-framework turns a raw push to /projects/<p>/topics/<t> into a messagePublished CloudEvent.
          pushEndpoint: pulumi.interpolate`${functions.tile.url}/projects/${project}/topics/${this.tileTopic.name}`,
          oidcToken: { serviceAccountEmail: accounts.trigger.email, audience: functions.tile.url },
        },
        labels,
      },
      parent,
    );
    new cloudscheduler.Job(
      `${name}-mosaic-sweep`,
      {
        project,
        region: cfg.region,
        description: 'Assemble the mosaic of every finished scene (Tessera)',
        schedule: MOSAIC_SCHEDULE,
        timeZone: 'Etc/UTC',
        attemptDeadline: `${SUPPORT_FUNCTION_TIMEOUT_SEC + 20}s`,
        retryConfig: { retryCount: 0 },
        httpTarget: {
          uri: functions.mosaic.url,
          httpMethod: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: Buffer.from('{}').toString('base64'),
          oidcToken: { serviceAccountEmail: accounts.trigger.email, audience: functions.mosaic.url },
        },
      },
      afterApis,
    );
    // The dead-letter policy also needs Pub/Sub's agent to ack on the source subscription.
    new pubsub.SubscriptionIAMMember(
      `${name}-agent-subscriber`,
      { project, subscription: this.tileSubscription.name, role: 'roles/pubsub.subscriber', member: pubsubAgent },
      parent,
    );

    // Alerts: a log-based metric on stolen leases, and dead letters waiting.
    const prefix = monitoringPrefix('gcp', cfg.stack);
    const channels = cfg.alertEmail
      ? [
          new monitoring.NotificationChannel(
            `${name}-alerts`,
            { project, type: 'email', displayName: `Tessera ${cfg.stack}`, labels: { email_address: cfg.alertEmail } },
            afterApis,
          ).name,
        ]
      : [];
    const serviceNames = pulumi.all(FUNCTION_ROLES.map((r) => functions[r].serviceConfig.apply((s) => s?.service ?? '')));
    const leaseStolen = new logging.Metric(
      `${name}-lease-stolen`,
      {
        project,
        name: `${prefix}-lease-stolen`,
        description: 'Commits refused because the lease was taken over (LeaseStolen)',
        filter: serviceNames.apply(
          (names) =>
            `resource.type="cloud_run_revision" AND resource.labels.service_name=(${names.map((n) => `"${n}"`).join(' OR ')}) AND ${LEASE_STOLEN_LOG_FILTER}`,
        ),
        metricDescriptor: { metricKind: 'DELTA', valueType: 'INT64', unit: '1' },
      },
      afterApis,
    );
    new monitoring.AlertPolicy(
      `${name}-lease-stolen`,
      {
        project,
        displayName: `${prefix}: lease stolen`,
        combiner: 'OR',
        conditions: [
          {
            displayName: 'LeaseStolen logged',
            conditionThreshold: {
              filter: pulumi.interpolate`metric.type="logging.googleapis.com/user/${leaseStolen.name}" AND resource.type="cloud_run_revision"`,
              comparison: 'COMPARISON_GT',
              thresholdValue: 0,
              duration: '0s',
              aggregations: [{ alignmentPeriod: '60s', perSeriesAligner: 'ALIGN_DELTA' }],
              trigger: { count: 1 },
            },
          },
        ],
        documentation: {
          content:
            'A worker committed after its lease was taken over. The create-only write kept the output correct, but the lease is too short for the work or a worker stalled: check tessera:leaseSeconds against the function timeout.',
          mimeType: 'text/markdown',
        },
        notificationChannels: channels,
        userLabels: labels,
      },
      parent,
    );
    new monitoring.AlertPolicy(
      `${name}-dead-letters`,
      {
        project,
        displayName: `${prefix}: tile jobs dead-lettered`,
        combiner: 'OR',
        conditions: [
          {
            displayName: 'Messages waiting in the dead-letter subscription',
            conditionThreshold: {
              filter: pulumi.interpolate`metric.type="pubsub.googleapis.com/subscription/num_undelivered_messages" AND resource.type="pubsub_subscription" AND resource.labels.subscription_id="${deadLetterSubscription.name}"`,
              comparison: 'COMPARISON_GT',
              thresholdValue: 0,
              duration: '0s',
              aggregations: [{ alignmentPeriod: '300s', perSeriesAligner: 'ALIGN_MAX' }],
              trigger: { count: 1 },
            },
          },
        ],
        documentation: {
          content: `Tile jobs failed ${cfg.maxReceiveCount} deliveries. Inspect them in the dead-letter subscription, fix the cause, then republish.`,
          mimeType: 'text/markdown',
        },
        notificationChannels: channels,
        userLabels: labels,
      },
      afterApis,
    );

    this.registerOutputs({
      sourceBucket: this.sourceBucket.name,
      outputBucket: this.outputBucket.name,
      tileTopic: this.tileTopic.name,
      deadLetterTopic: this.deadLetterTopic.name,
      tileSubscription: this.tileSubscription.name,
      functions: Object.fromEntries(FUNCTION_ROLES.map((r) => [r, functions[r].name])),
    });
  }
}
