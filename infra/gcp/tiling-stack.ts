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
    // Least privilege, as a table: reads on whole buckets (listing needs the bucket), writes limited
    // to the function's own output prefix by an IAM condition on the object name.
    const bucketGrants: readonly { id: string; bucket: storage.Bucket; role: string; who: FunctionRole; onlyUnder?: string }[] = [
      // scene: read sources, create scene manifests.
      { id: 'scene-read-sources', bucket: this.sourceBucket, role: 'roles/storage.objectViewer', who: 'scene' },
      { id: 'scene-read-outputs', bucket: this.outputBucket, role: 'roles/storage.objectViewer', who: 'scene' },
      {
        id: 'scene-write-manifests',
        bucket: this.outputBucket,
        role: 'roles/storage.objectCreator',
        who: 'scene',
        onlyUnder: OUTPUT_PREFIXES.scenes,
      },
      // tile: read sources, create tiles and replace them in a repair (objectUser: create and delete).
      { id: 'tile-read-sources', bucket: this.sourceBucket, role: 'roles/storage.objectViewer', who: 'tile' },
      { id: 'tile-read-outputs', bucket: this.outputBucket, role: 'roles/storage.objectViewer', who: 'tile' },
      {
        id: 'tile-write-tiles',
        bucket: this.outputBucket,
        role: 'roles/storage.objectUser',
        who: 'tile',
        onlyUnder: OUTPUT_PREFIXES.tiles,
      },
      // mosaic: read manifests and list tiles, create mosaics.
      { id: 'mosaic-read-outputs', bucket: this.outputBucket, role: 'roles/storage.objectViewer', who: 'mosaic' },
      {
        id: 'mosaic-write-mosaics',
        bucket: this.outputBucket,
        role: 'roles/storage.objectCreator',
        who: 'mosaic',
        onlyUnder: OUTPUT_PREFIXES.mosaics,
      },
    ];
    for (const g of bucketGrants) {
      const condition = g.onlyUnder === undefined ? undefined : underPrefix(g.bucket.name, g.onlyUnder, `${g.onlyUnder} only`);
      new storage.BucketIAMMember(
        `${name}-${g.id}`,
        { bucket: g.bucket.name, role: g.role, member: member(g.who), ...(condition ? { condition } : {}) },
        parent,
      );
    }
    // scene publishes tile jobs; tile routes poison to the dead-letter topic.
    const topicGrants = [
      { id: 'scene-publish', topic: this.tileTopic, who: 'scene' },
      { id: 'tile-dead-letter', topic: this.deadLetterTopic, who: 'tile' },
    ] as const;
    for (const g of topicGrants) {
      new pubsub.TopicIAMMember(
        `${name}-${g.id}`,
        { project, topic: g.topic.name, role: 'roles/pubsub.publisher', member: member(g.who) },
        parent,
      );
    }
    // tile claims in Firestore, in the claims database only.
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
    // serviceConfig.service is the full name (projects/<p>/locations/<r>/services/<name>); logs carry the last part.
    const serviceNames = pulumi.all(
      FUNCTION_ROLES.map((r) => functions[r].serviceConfig.apply((s) => (s?.service ?? '').split('/').at(-1) ?? '')),
    );
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
    /** An alert on the first occurrence of a metric (above 0 in one alignment period). */
    const alertOnAny = (id: string, title: string, filter: pulumi.Input<string>, aligner: string, period: string, content: string) =>
      new monitoring.AlertPolicy(
        `${name}-${id}`,
        {
          project,
          displayName: `${prefix}: ${title}`,
          combiner: 'OR',
          conditions: [
            {
              displayName: title,
              conditionThreshold: {
                filter,
                comparison: 'COMPARISON_GT',
                thresholdValue: 0,
                duration: '0s',
                aggregations: [{ alignmentPeriod: period, perSeriesAligner: aligner }],
                trigger: { count: 1 },
              },
            },
          ],
          documentation: { content, mimeType: 'text/markdown' },
          notificationChannels: channels,
          userLabels: labels,
        },
        afterApis,
      );
    alertOnAny(
      'lease-stolen',
      'lease stolen',
      pulumi.interpolate`metric.type="logging.googleapis.com/user/${leaseStolen.name}" AND resource.type="cloud_run_revision"`,
      'ALIGN_DELTA',
      '60s',
      'A worker committed after its lease was taken over. The create-only write kept the output correct, but the lease is too short for the work or a worker stalled: check tessera:leaseSeconds against the function timeout.',
    );
    alertOnAny(
      'dead-letters',
      'tile jobs dead-lettered',
      pulumi.interpolate`metric.type="pubsub.googleapis.com/subscription/num_undelivered_messages" AND resource.type="pubsub_subscription" AND resource.labels.subscription_id="${deadLetterSubscription.name}"`,
      'ALIGN_MAX',
      '300s',
      `Tile jobs failed ${cfg.maxReceiveCount} deliveries. Inspect them in the dead-letter subscription, fix the cause, then republish.`,
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
