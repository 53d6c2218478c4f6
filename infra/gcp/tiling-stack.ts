import * as cloudfunctionsv2 from '@pulumi/gcp/cloudfunctionsv2';
import * as cloudrunv2 from '@pulumi/gcp/cloudrunv2';
import * as cloudscheduler from '@pulumi/gcp/cloudscheduler';
import * as firestore from '@pulumi/gcp/firestore';
import * as logging from '@pulumi/gcp/logging';
import * as monitoring from '@pulumi/gcp/monitoring';
import * as projects from '@pulumi/gcp/projects';
import * as pubsub from '@pulumi/gcp/pubsub';
import * as secretmanager from '@pulumi/gcp/secretmanager';
import * as serviceaccount from '@pulumi/gcp/serviceaccount';
import * as storage from '@pulumi/gcp/storage';
import type { input as gcpInput } from '@pulumi/gcp/types';
import * as pulumi from '@pulumi/pulumi';
import * as time from '@pulumiverse/time';
import type { Platform } from '../../shared/domain/ceilings.js';
import { FUNCTION_ROLES as IDENTITY_ROLES, type FunctionRole as IdentityRole, type StoreName } from '../../shared/domain/key-layout.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import {
  FIRESTORE_DEFAULT_DATABASE,
  FUNCTION_ROLES,
  type FunctionRole,
  type GcpStackConfig,
  INGEST_FUNCTION_TIMEOUT_SEC,
  OUTPUT_CORS,
  PUBSUB_MAX_ACK_DEADLINE_SEC,
  STAGING_PREFIX,
  STREAM_FUNCTION_MEMORY_MB,
  STREAM_FUNCTION_TIMEOUT_SEC,
  SUPPORT_FUNCTION_MEMORY_MB,
  SUPPORT_FUNCTION_TIMEOUT_SEC,
} from '../common/config.js';
import { functionEnvironment } from '../common/environment.js';
import { gcpCustomRoleId, gcpServiceAccountId, monitoringPrefix, slug } from '../common/naming.js';
import { type Archive, GCP_ENTRY_POINTS } from '../common/packaging.js';
import { gcpLabels, type StandardTags } from '../common/tags.js';
import { GCS_CUSTOM_ROLES, GCS_GRANT_ROLE, type GcsCustomRole, gcsGrantPlan, objectCondition } from './storage-grants.js';
import { gcpTelemetry, gcpTelemetryServices } from './telemetry.js';

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
  // Project IAM grants (projects.IAMMember) go through Resource Manager; service accounts through IAM.
  'cloudresourcemanager.googleapis.com',
  'cloudscheduler.googleapis.com',
  'eventarc.googleapis.com',
  'firestore.googleapis.com',
  'iam.googleapis.com',
  'logging.googleapis.com',
  'monitoring.googleapis.com',
  'pubsub.googleapis.com',
  'run.googleapis.com',
  'storage.googleapis.com',
] as const;
/** Enabled only by a stack with a PostGIS sink, whose URL it keeps (tessera:featureSinkUrl). */
export const GCP_SECRET_MANAGER_SERVICE = 'secretmanager.googleapis.com';

const STORAGE_FINALIZED = 'google.cloud.storage.object.v1.finalized';
/**
 * How often Cloud Scheduler asks the mosaic function to sweep: assemble every
 * scene with a manifest and no mosaic (as on AWS). A failed run is not
 * retried; the next run is the retry.
 */
export const MOSAIC_SCHEDULE = '*/5 * * * *';
/**
 * When Cloud Scheduler runs the manifest reconcile (design note 2: weekly), Mondays 03:00 UTC: it compares the
 * promoted prefix with the manifest both ways and reports; it never writes.
 */
export const RECONCILE_SCHEDULE = '0 3 * * 1';
/** The Firestore collection of the ingest manifest, in the stack's database beside the claims. */
export const MANIFEST_COLLECTION = 'ingest-manifest';
const RETENTION = '604800s'; // 7 days: Pub/Sub's default, time to inspect dead letters
/** Pub/Sub's own retry backoff bounds (10-600 s), widest spread: a throttled store gets time to recover. */
const RETRY_BACKOFF = { minimumBackoff: '10s', maximumBackoff: '600s' };
/**
 * How long the functions wait after the trigger grants and the service agents'
 * roles are in place. IAM changes take up to minutes to propagate, and on a
 * fresh project the Eventarc service agent is created on first use: creating
 * the Eventarc trigger right after its grants fails with "Permission denied
 * while using the Eventarc Service Agent" (terraform-provider-google#25294,
 * pulumi-gcp#1290). The agents are created explicitly (ServiceIdentity), then
 * granted, then this wait.
 */
export const IAM_PROPAGATION_WAIT = '120s';
/**
 * The roles the dedicated Cloud Build account needs to build a function from
 * source (Google's "custom service account for Cloud Build" page): build logs,
 * the image in Artifact Registry; reading the source archive is granted on the
 * artifacts bucket only.
 */
export const BUILD_PROJECT_ROLES = ['roles/logging.logWriter', 'roles/artifactregistry.writer'] as const;
/** What `tessera verify` does with its two taps (functions/gcp/verify-target.ts Tap): the project-level half of its grants. */
export const VERIFY_TAP_PERMISSIONS = [
  'pubsub.subscriptions.create',
  'pubsub.subscriptions.get',
  'pubsub.subscriptions.consume',
  'pubsub.subscriptions.delete',
] as const;
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

/** `sceneIndex` -> `scene-index`, for logical resource names. */
const kebab = (id: string): string => id.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

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
  /** Ingest requests (`tessera ingest --cloud gcp` publishes here), pushed to the ingest function. */
  readonly ingestTopic: pubsub.Topic;
  readonly ingestDeadLetterTopic: pubsub.Topic;
  readonly ingestSubscription: pubsub.Subscription;
  readonly functions: Readonly<Record<FunctionRole, cloudfunctionsv2.Function>>;
  /**
   * One account per function, one for the triggers, and `verify`'s: the identity an operator or CI impersonates
   * to run `tessera verify` (docs/iam.md), holding its layout grants and nothing the functions do not need.
   */
  readonly serviceAccounts: Readonly<Record<IdentityRole | 'trigger', serviceaccount.Account>>;
  /** The account Cloud Build builds the functions as (buildConfig.serviceAccount). */
  readonly buildAccount: serviceaccount.Account;

  constructor(name: string, args: GcpTilingStackArgs, opts?: pulumi.ComponentResourceOptions) {
    super('tessera:gcp:TilingStack', name, {}, opts);
    const { config: cfg, archive } = args;
    const labels = gcpLabels(args.tags);
    const parent = { parent: this };
    const project = cfg.project;
    const storageAgent = storage.getProjectServiceAccountOutput({ project }, parent);

    const services = [
      ...new Set([
        ...GCP_SERVICES,
        ...(cfg.featureSinkUrl === undefined ? [] : [GCP_SECRET_MANAGER_SERVICE]),
        ...gcpTelemetryServices(cfg),
      ]),
    ].map((service) => new projects.Service(`${name}-${service.split('.')[0]}`, { project, service, disableOnDestroy: false }, parent));
    const afterApis = { parent: this, dependsOn: services };
    // Service agents are created lazily by Google on first use; creating them here makes them exist before their grants.
    const agent = (service: 'pubsub' | 'eventarc') =>
      new projects.ServiceIdentity(`${name}-${service}-agent`, { project, service: `${service}.googleapis.com` }, afterApis);
    const pubsubAgent = agent('pubsub').member;
    const eventarcAgent = agent('eventarc');

    // Buckets: uniform access, public access prevention enforced (Google-managed encryption is always on).
    const bucket = (
      what: string,
      versioned: boolean,
      extraRules: gcpInput.storage.BucketLifecycleRule[] = [],
      corsOrigins: readonly string[] | undefined = undefined,
    ): storage.Bucket =>
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
                lifecycleRules: [
                  { action: { type: 'Delete' }, condition: { daysSinceNoncurrentTime: 30, withState: 'ARCHIVED' } },
                  ...extraRules,
                ],
              }
            : extraRules.length > 0
              ? { lifecycleRules: extraRules }
              : {}),
          // tessera:outputCorsOrigins: GCS's responseHeaders are both the headers a page may send and read.
          ...(corsOrigins === undefined
            ? {}
            : {
                cors: [
                  {
                    origins: [...corsOrigins],
                    methods: [...OUTPUT_CORS.methods],
                    responseHeaders: [...OUTPUT_CORS.requestHeaders, ...OUTPUT_CORS.responseHeaders],
                    maxAgeSeconds: OUTPUT_CORS.maxAgeSec,
                  },
                ],
              }),
          labels,
        },
        afterApis,
      );
    // Ingest stages each attempt's download under staging/ in the source bucket (outside the scene prefix, so
    // Eventarc's scene function ignores it): kept tessera:stagingRetentionDays to inspect, then deleted.
    this.sourceBucket = bucket('sources', false, [
      { action: { type: 'Delete' }, condition: { age: cfg.stagingRetentionDays, matchesPrefixes: [STAGING_PREFIX] } },
    ]);
    this.outputBucket = bucket('outputs', true, [], cfg.outputCorsOrigins);
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

    // Claims: the stack's own named Firestore database (point-in-time recovery on, TTL on expires_at). The
    // (default) database often exists already (App Engine, another stack), and creating it again fails with 409;
    // tessera:gcpFirestoreDatabase "(default)" uses that one instead, without declaring it.
    const adoptDefault = cfg.firestoreDatabase === FIRESTORE_DEFAULT_DATABASE;
    const database = adoptDefault
      ? undefined
      : new firestore.Database(
          `${name}-firestore`,
          {
            project,
            name: cfg.firestoreDatabase,
            locationId: cfg.region,
            type: 'FIRESTORE_NATIVE',
            pointInTimeRecoveryEnablement: 'POINT_IN_TIME_RECOVERY_ENABLED',
            // The stack owns this database: `pulumi destroy` removes it with the claims.
            deletionPolicy: 'DELETE',
          },
          afterApis,
        );
    const databaseName: pulumi.Input<string> = database ? database.name : FIRESTORE_DEFAULT_DATABASE;
    new firestore.Field(
      `${name}-claims-ttl`,
      {
        project,
        database: databaseName,
        collection: cfg.claimsCollection,
        field: 'expires_at',
        ttlConfig: {},
        // A TTL timestamp that only grows makes a hot single-field index; claims are read by id only.
        indexConfig: {},
      },
      adoptDefault ? afterApis : parent,
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

    // Ingest requests: topic -> push subscription (created below, once the function exists) with its own
    // dead-letter topic, so a poison request is never mixed with a poison tile job.
    this.ingestTopic = new pubsub.Topic(`${name}-ingest`, { project, messageRetentionDuration: RETENTION, labels }, afterApis);
    this.ingestDeadLetterTopic = new pubsub.Topic(
      `${name}-ingest-dead-letter`,
      { project, messageRetentionDuration: RETENTION, labels },
      afterApis,
    );
    const ingestDeadLetterSubscription = new pubsub.Subscription(
      `${name}-ingest-dead-letter`,
      { project, topic: this.ingestDeadLetterTopic.id, messageRetentionDuration: RETENTION, expirationPolicy: { ttl: '' }, labels },
      parent,
    );

    // One service account per function, one for the triggers (Eventarc and the push subscription), and verify's.
    const accounts = {} as Record<IdentityRole | 'trigger', serviceaccount.Account>;
    for (const role of [...IDENTITY_ROLES, 'trigger'] as const) {
      accounts[role] = new serviceaccount.Account(
        `${name}-${role}`,
        { project, accountId: gcpServiceAccountId(cfg.stack, role), displayName: `Tessera ${cfg.stack} ${role}` },
        afterApis,
      );
    }
    this.serviceAccounts = accounts;
    const member = (role: IdentityRole | 'trigger') => accounts[role].member;
    const sink =
      cfg.featureSinkUrl === undefined
        ? undefined
        : featureSinkSecret(this, `${name}-feature-sink`, {
            project,
            secretId: `tessera-${slug(cfg.stack)}-feature-sink`,
            region: cfg.region,
            url: cfg.featureSinkUrl,
            reader: member('tile'),
            labels,
            afterApis,
          });
    // The stream function writes its batches to the same PostGIS (docs/feature-batches.md): it reads the secret too.
    const streamSinkGrant =
      sink === undefined
        ? undefined
        : new secretmanager.SecretIamMember(
            `${name}-feature-sink-stream-reader`,
            { project, secretId: sink.secret.secretId, role: 'roles/secretmanager.secretAccessor', member: member('stream') },
            parent,
          );
    // tessera:telemetry (docs/telemetry.md): nothing at all unless it is set.
    const telemetry = gcpTelemetry(this, name, cfg, { member, labels, afterApis });
    // Builds run as a dedicated account: since 2024 a new project's default build account may lack what a build needs.
    this.buildAccount = new serviceaccount.Account(
      `${name}-build`,
      { project, accountId: gcpServiceAccountId(cfg.stack, 'build'), displayName: `Tessera ${cfg.stack} function builds` },
      afterApis,
    );
    const buildGrants: pulumi.Resource[] = BUILD_PROJECT_ROLES.map(
      (role) =>
        new projects.IAMMember(
          `${name}-build-${role.split('/')[1]?.split('.')[0]}`,
          { project, role, member: this.buildAccount.member },
          afterApis,
        ),
    );
    buildGrants.push(
      new storage.BucketIAMMember(
        `${name}-build-read-source`,
        { bucket: artifacts.name, role: 'roles/storage.objectViewer', member: this.buildAccount.member },
        parent,
      ),
    );
    // Object grants: derived from the one key layout (shared/domain/key-layout.ts ROLE_ACCESS) by gcsGrantPlan, with
    // Cloud Storage's semantics (a replace needs delete too), one binding per (role, area, permission) conditioned on
    // the area's object names, and one list binding per (role, bucket). docs/iam.md has the resulting table.
    const customRoles = {} as Record<GcsCustomRole, projects.IAMCustomRole>;
    for (const id of Object.keys(GCS_CUSTOM_ROLES) as GcsCustomRole[]) {
      const def = GCS_CUSTOM_ROLES[id];
      customRoles[id] = new projects.IAMCustomRole(
        `${name}-${kebab(id)}`,
        {
          project,
          roleId: gcpCustomRoleId(cfg.stack, id),
          title: `${def.title} (${cfg.stack})`,
          description: def.description,
          permissions: [...def.permissions],
          stage: 'GA',
        },
        afterApis,
      );
    }
    const buckets: Record<StoreName, storage.Bucket> = { sources: this.sourceBucket, outputs: this.outputBucket };
    const grantRole = (kind: keyof typeof GCS_GRANT_ROLE): pulumi.Input<string> => {
      const r = GCS_GRANT_ROLE[kind];
      return 'predefined' in r ? r.predefined : customRoles[r.custom].name;
    };
    for (const role of IDENTITY_ROLES) {
      const plan = gcsGrantPlan(role, cfg.source.prefix);
      for (const g of plan.objects) {
        const bucketName = buckets[g.store].name;
        new storage.BucketIAMMember(
          `${name}-${role}-${g.kind}-${kebab(g.area)}`,
          {
            bucket: bucketName,
            role: grantRole(g.kind),
            member: member(role),
            condition: {
              // IAM caps a title at 100 characters and a description at 256.
              title: `${role} ${g.kind} ${g.exact ? '' : 'under '}${g.prefix}`.slice(0, 100),
              description: g.why.slice(0, 256),
              expression: bucketName.apply((b) => objectCondition(b, g.prefix, g.exact)),
            },
          },
          parent,
        );
      }
      for (const store of plan.lists) {
        new storage.BucketIAMMember(
          `${name}-${role}-list-${store}`,
          { bucket: buckets[store].name, role: customRoles.objectLister.name, member: member(role) },
          parent,
        );
      }
    }
    // scene publishes tile jobs; scene and tile settle poison in the dead-letter topic at once (shared/app/poison.ts).
    const topicGrants = [
      { id: 'scene-publish', topic: this.tileTopic, who: 'scene' },
      // A scene event no retry can cure is published there and acknowledged, not retried by Eventarc for a day.
      { id: 'scene-dead-letter', topic: this.deadLetterTopic, who: 'scene' },
      // A long fan-out continues in chunk messages on the tile topic, handled by the tile function.
      { id: 'tile-fan-out', topic: this.tileTopic, who: 'tile' },
      { id: 'tile-dead-letter', topic: this.deadLetterTopic, who: 'tile' },
      // A malformed ingest request is settled at once in the ingest dead-letter topic.
      { id: 'ingest-dead-letter', topic: this.ingestDeadLetterTopic, who: 'ingest' },
      // An unreadable batch object's event is settled at once there too, as the scene function's is.
      { id: 'stream-dead-letter', topic: this.deadLetterTopic, who: 'stream' },
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
          expression: pulumi.interpolate`resource.name.startsWith("projects/${project}/databases/${databaseName}")`,
        },
      },
      afterApis,
    );
    // stream claims its batches in the same database (docs/feature-batches.md).
    new projects.IAMMember(
      `${name}-stream-claims`,
      {
        project,
        role: 'roles/datastore.user',
        member: member('stream'),
        condition: {
          title: 'claims database only',
          expression: pulumi.interpolate`resource.name.startsWith("projects/${project}/databases/${databaseName}")`,
        },
      },
      afterApis,
    );
    // The manifest lives in the same database: ingest creates rows (create(), never set()), reconcile reads them.
    for (const [who, role] of [
      ['ingest', 'roles/datastore.user'],
      ['reconcile', 'roles/datastore.viewer'],
    ] as const) {
      new projects.IAMMember(
        `${name}-${who}-manifest`,
        {
          project,
          role,
          member: member(who),
          condition: {
            title: 'claims database only',
            expression: pulumi.interpolate`resource.name.startsWith("projects/${project}/databases/${databaseName}")`,
          },
        },
        afterApis,
      );
    }
    // verify's account beyond its object grants (docs/deploy.md, step 4): the claim race and its cleanup in the claims
    // database; the replay and the poison probe, published to the tile topic; and its two taps, subscriptions of its
    // own on the tile and dead-letter topics. A tap needs attachSubscription on the topic (roles/pubsub.subscriber
    // there), while creating, reading and deleting a subscription are checked on the project: a custom role holds
    // exactly those four permissions (Pub/Sub has no IAM condition on subscription names to narrow it by).
    new projects.IAMMember(
      `${name}-verify-claims`,
      {
        project,
        role: 'roles/datastore.user',
        member: member('verify'),
        condition: {
          title: 'claims database only',
          expression: pulumi.interpolate`resource.name.startsWith("projects/${project}/databases/${databaseName}")`,
        },
      },
      afterApis,
    );
    new pubsub.TopicIAMMember(
      `${name}-verify-publish`,
      { project, topic: this.tileTopic.name, role: 'roles/pubsub.publisher', member: member('verify') },
      parent,
    );
    for (const [id, topic] of [
      ['tiles', this.tileTopic],
      ['dead-letter', this.deadLetterTopic],
    ] as const) {
      new pubsub.TopicIAMMember(
        `${name}-verify-tap-${id}`,
        { project, topic: topic.name, role: 'roles/pubsub.subscriber', member: member('verify') },
        parent,
      );
    }
    const verifyTaps = new projects.IAMCustomRole(
      `${name}-verify-taps`,
      {
        project,
        roleId: gcpCustomRoleId(cfg.stack, 'verifyTaps'),
        title: `Tessera verify taps (${cfg.stack})`,
        description: "tessera verify's own subscriptions: create, read from and delete them (docs/deploy.md)",
        permissions: [...VERIFY_TAP_PERMISSIONS],
        stage: 'GA',
      },
      afterApis,
    );
    new projects.IAMMember(`${name}-verify-taps`, { project, role: verifyTaps.name, member: member('verify') }, afterApis);
    // Triggers (Eventarc, the push subscription, Cloud Scheduler) share one account; GCS publishes its events through Pub/Sub.
    const triggerGrants = [
      new projects.IAMMember(
        `${name}-trigger-receiver`,
        { project, role: 'roles/eventarc.eventReceiver', member: member('trigger') },
        afterApis,
      ),
      new projects.IAMMember(
        `${name}-gcs-agent-publisher`,
        { project, role: 'roles/pubsub.publisher', member: pulumi.interpolate`serviceAccount:${storageAgent.emailAddress}` },
        afterApis,
      ),
      new projects.IAMMember(
        `${name}-eventarc-agent-role`,
        { project, role: 'roles/eventarc.serviceAgent', member: eventarcAgent.member },
        afterApis,
      ),
    ];
    // Then wait for them to propagate (IAM_PROPAGATION_WAIT): the scene function's Eventarc trigger is created after it.
    const propagated = new time.Sleep(
      `${name}-iam-propagation`,
      { createDuration: IAM_PROPAGATION_WAIT },
      {
        parent: this,
        dependsOn: [
          ...triggerGrants,
          ...buildGrants,
          ...(sink ? [sink.grant] : []),
          ...(streamSinkGrant ? [streamSinkGrant] : []),
          ...telemetry.grants,
        ],
      },
    );
    // Pub/Sub's own agent forwards undeliverable messages: it publishes to the dead-letter topic and acks the original.
    new pubsub.TopicIAMMember(
      `${name}-agent-dead-letter`,
      { project, topic: this.deadLetterTopic.name, role: 'roles/pubsub.publisher', member: pubsubAgent },
      parent,
    );
    new pubsub.TopicIAMMember(
      `${name}-agent-ingest-dead-letter`,
      { project, topic: this.ingestDeadLetterTopic.name, role: 'roles/pubsub.publisher', member: pubsubAgent },
      parent,
    );

    // Functions.
    const timeouts: Record<FunctionRole, number> = {
      scene: SUPPORT_FUNCTION_TIMEOUT_SEC,
      tile: cfg.lease.functionTimeoutSec,
      mosaic: SUPPORT_FUNCTION_TIMEOUT_SEC,
      ingest: INGEST_FUNCTION_TIMEOUT_SEC,
      reconcile: SUPPORT_FUNCTION_TIMEOUT_SEC,
      stream: STREAM_FUNCTION_TIMEOUT_SEC,
    };
    const memory: Record<FunctionRole, number> = {
      scene: SUPPORT_FUNCTION_MEMORY_MB,
      tile: cfg.memoryMb,
      mosaic: SUPPORT_FUNCTION_MEMORY_MB,
      ingest: SUPPORT_FUNCTION_MEMORY_MB,
      reconcile: SUPPORT_FUNCTION_MEMORY_MB,
      stream: STREAM_FUNCTION_MEMORY_MB,
    };
    // Scene is Eventarc-triggered (event-driven), mosaic is HTTP (Cloud Scheduler), the tile worker follows tessera:gcpTileTrigger.
    // Ingest is a Pub/Sub push (event-driven: 540 s, under the 600 s push deadline); reconcile is HTTP (Cloud Scheduler).
    const platforms: Record<FunctionRole, Platform> = {
      scene: 'gcf2-event',
      tile: cfg.platform,
      mosaic: 'gcf2-http',
      ingest: 'gcf2-event',
      reconcile: 'gcf2-http',
      // Eventarc, as the scene function: every object finalized in the source bucket, filtered to streams/ by the handler.
      stream: 'gcf2-event',
    };
    const triggers: Record<FunctionRole, storage.Bucket | undefined> = {
      scene: this.sourceBucket,
      tile: undefined,
      mosaic: undefined,
      ingest: undefined,
      reconcile: undefined,
      stream: this.sourceBucket,
    };
    // The tile subscription's dead-letter count, told to the tile function (its redelivery schedule plans against it).
    // Scene (Eventarc, retried for 24 h, no count) and mosaic (Cloud Scheduler) have none.
    const maxDeliveryAttempts = cfg.maxReceiveCount;
    const functions = {} as Record<FunctionRole, cloudfunctionsv2.Function>;
    const invokers = {} as Record<FunctionRole, cloudrunv2.ServiceIamMember>;
    for (const role of FUNCTION_ROLES) {
      const triggerBucket = triggers[role];
      functions[role] = new cloudfunctionsv2.Function(
        `${name}-${role}`,
        {
          project,
          location: cfg.region,
          description: `Tessera ${role} (${cfg.stack})`,
          buildConfig: {
            serviceAccount: this.buildAccount.id,
            runtime: cfg.runtime.id, // shared/domain/runtimes.ts, checked by parseStackConfig
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
                // Each push-triggered function settles poison in its own subscription's dead-letter topic.
                deadLetterQueue: role === 'ingest' ? this.ingestDeadLetterTopic.name : this.deadLetterTopic.name,
                gcpProject: project,
                ...(adoptDefault ? {} : { firestoreDatabase: databaseName }),
                ...(role === 'tile' || role === 'ingest' ? { maxDeliveries: maxDeliveryAttempts } : {}),
                ...(role === 'ingest' || role === 'reconcile' ? { manifestTable: MANIFEST_COLLECTION } : {}),
                ...(role === 'ingest' ? { ingestQueue: this.ingestTopic.name } : {}),
              }),
              NODE_OPTIONS: '--enable-source-maps',
              ...telemetry.environment,
            },
            // The platform puts the sink URL into TESSERA_FEATURE_SINK when an instance starts; the configuration names
            // only the secret and its version, so a rotation through `pulumi up` is a new revision on the new value.
            ...(((role === 'tile' || role === 'stream') && sink) || telemetry.secretEnvironment.length > 0
              ? {
                  secretEnvironmentVariables: [
                    ...((role === 'tile' || role === 'stream') && sink
                      ? [{ key: ENV.featureSink, projectId: project, secret: sink.secret.secretId, version: sink.version.version }]
                      : []),
                    // The OTLP exporter's headers (tessera:telemetryHeaders), for every function.
                    ...telemetry.secretEnvironment,
                  ],
                }
              : {}),
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
        // A build needs its account's roles, and the scene function's Eventarc trigger its grants, before creation.
        // A revision that reads a secret is refused unless its account may access it: the tile function waits for that grant.
        {
          parent: this,
          dependsOn: [
            ...services,
            ...buildGrants,
            ...(triggerBucket ? [...triggerGrants, propagated] : []),
            ...(role === 'tile' && sink ? [sink.grant, propagated] : []),
            ...(role === 'stream' && streamSinkGrant ? [streamSinkGrant, propagated] : []),
            ...(telemetry.grants.length > 0 ? [...telemetry.grants, propagated] : []),
          ],
        },
      );
      invokers[role] = new cloudrunv2.ServiceIamMember(
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
    // Pub/Sub push and Cloud Scheduler must call the Cloud Run service URI (run.app), not the function's
    // cloudfunctions.net `url`: with internal-only ingress only the run.app address counts their calls as internal.
    const serviceUri = (fn: cloudfunctionsv2.Function) => fn.serviceConfig.apply((s) => s?.uri ?? '');
    const tileUri = serviceUri(functions.tile);
    const mosaicUri = serviceUri(functions.mosaic);
    const ingestUri = serviceUri(functions.ingest);
    const reconcileUri = serviceUri(functions.reconcile);

    this.tileSubscription = new pubsub.Subscription(
      `${name}-tiles`,
      {
        project,
        topic: this.tileTopic.id,
        ackDeadlineSeconds: cfg.ackDeadlineSec,
        messageRetentionDuration: RETENTION,
        retryPolicy: RETRY_BACKOFF,
        deadLetterPolicy: { deadLetterTopic: this.deadLetterTopic.id, maxDeliveryAttempts },
        expirationPolicy: { ttl: '' },
        pushConfig: {
          // The functions-framework turns a raw push to /projects/<p>/topics/<t> into a messagePublished CloudEvent.
          pushEndpoint: pulumi.interpolate`${tileUri}/projects/${project}/topics/${this.tileTopic.name}`,
          oidcToken: { serviceAccountEmail: accounts.trigger.email, audience: tileUri },
        },
        labels,
      },
      // Pushes start at once: the trigger account must already be allowed to invoke the tile service.
      { parent: this, dependsOn: [invokers.tile] },
    );
    this.ingestSubscription = new pubsub.Subscription(
      `${name}-ingest`,
      {
        project,
        topic: this.ingestTopic.id,
        ackDeadlineSeconds: PUBSUB_MAX_ACK_DEADLINE_SEC,
        messageRetentionDuration: RETENTION,
        retryPolicy: RETRY_BACKOFF,
        deadLetterPolicy: { deadLetterTopic: this.ingestDeadLetterTopic.id, maxDeliveryAttempts },
        expirationPolicy: { ttl: '' },
        pushConfig: {
          pushEndpoint: pulumi.interpolate`${ingestUri}/projects/${project}/topics/${this.ingestTopic.name}`,
          oidcToken: { serviceAccountEmail: accounts.trigger.email, audience: ingestUri },
        },
        labels,
      },
      { parent: this, dependsOn: [invokers.ingest] },
    );
    new pubsub.SubscriptionIAMMember(
      `${name}-agent-ingest-subscriber`,
      { project, subscription: this.ingestSubscription.name, role: 'roles/pubsub.subscriber', member: pubsubAgent },
      parent,
    );
    new cloudscheduler.Job(
      `${name}-reconcile`,
      {
        project,
        region: cfg.region,
        description: 'Compare the promoted scenes with the ingest manifest, both ways (Tessera)',
        schedule: RECONCILE_SCHEDULE,
        timeZone: 'Etc/UTC',
        attemptDeadline: `${SUPPORT_FUNCTION_TIMEOUT_SEC + 20}s`,
        retryConfig: { retryCount: 0 },
        httpTarget: {
          uri: reconcileUri,
          httpMethod: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: Buffer.from('{}').toString('base64'),
          oidcToken: { serviceAccountEmail: accounts.trigger.email, audience: reconcileUri },
        },
      },
      { parent: this, dependsOn: [...services, invokers.reconcile] },
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
          uri: mosaicUri,
          httpMethod: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: Buffer.from('{}').toString('base64'),
          oidcToken: { serviceAccountEmail: accounts.trigger.email, audience: mosaicUri },
        },
      },
      { parent: this, dependsOn: [...services, invokers.mosaic] },
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
    const leaseStolenLogs = serviceNames.apply(
      (names) =>
        `resource.type="cloud_run_revision" AND resource.labels.service_name=(${names.map((n) => `"${n}"`).join(' OR ')}) AND ${LEASE_STOLEN_LOG_FILTER}`,
    );
    // A count to chart. The alert below matches the log lines itself: an alert policy that names a log-based
    // metric created in the same `pulumi up` fails with 404 for up to 10 minutes, until the metric is visible.
    new logging.Metric(
      `${name}-lease-stolen`,
      {
        project,
        name: `${prefix}-lease-stolen`,
        description: 'Commits refused because the lease was taken over (LeaseStolen)',
        filter: leaseStolenLogs,
        metricDescriptor: { metricKind: 'DELTA', valueType: 'INT64', unit: '1' },
      },
      afterApis,
    );
    const alert = (
      id: string,
      title: string,
      conditions: monitoring.AlertPolicyArgs['conditions'],
      content: string,
      extra: Partial<monitoring.AlertPolicyArgs> = {},
    ) =>
      new monitoring.AlertPolicy(
        `${name}-${id}`,
        {
          project,
          displayName: `${prefix}: ${title}`,
          combiner: 'OR',
          conditions,
          documentation: { content, mimeType: 'text/markdown' },
          notificationChannels: channels,
          userLabels: labels,
          ...extra,
        },
        afterApis,
      );
    // A log-match condition: alerts on the first matching line, at most once per rate-limit period.
    alert(
      'lease-stolen',
      'lease stolen',
      [{ displayName: 'lease stolen', conditionMatchedLog: { filter: leaseStolenLogs } }],
      'A worker committed after its lease was taken over. The create-only write kept the output correct, but the lease is too short for the work or a worker stalled: check tessera:leaseSeconds against the function timeout.',
      { alertStrategy: { notificationRateLimit: { period: '300s' }, autoClose: '1800s' } },
    );
    // A built-in Pub/Sub metric, which exists before the stack does.
    alert(
      'dead-letters',
      'tile jobs dead-lettered',
      [
        {
          displayName: 'tile jobs dead-lettered',
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
      `Tile jobs failed ${cfg.maxReceiveCount} deliveries. Inspect them in the dead-letter subscription, fix the cause, then republish.`,
    );
    alert(
      'ingest-dead-letters',
      'ingest requests dead-lettered',
      [
        {
          displayName: 'ingest requests dead-lettered',
          conditionThreshold: {
            filter: pulumi.interpolate`metric.type="pubsub.googleapis.com/subscription/num_undelivered_messages" AND resource.type="pubsub_subscription" AND resource.labels.subscription_id="${ingestDeadLetterSubscription.name}"`,
            comparison: 'COMPARISON_GT',
            thresholdValue: 0,
            duration: '0s',
            aggregations: [{ alignmentPeriod: '300s', perSeriesAligner: 'ALIGN_MAX' }],
            trigger: { count: 1 },
          },
        },
      ],
      'An ingest request was refused (a malformed request or an artefact that failed validation: settled at once) or failed every delivery. Inspect it in the ingest-dead-letter subscription (attribute tessera-reason), fix the cause, then run tessera ingest --cloud gcp again.',
    );

    this.registerOutputs({
      sourceBucket: this.sourceBucket.name,
      outputBucket: this.outputBucket.name,
      tileTopic: this.tileTopic.name,
      deadLetterTopic: this.deadLetterTopic.name,
      tileSubscription: this.tileSubscription.name,
      ingestTopic: this.ingestTopic.name,
      ingestDeadLetterTopic: this.ingestDeadLetterTopic.name,
      ingestDeadLetterSubscription: ingestDeadLetterSubscription.name,
      manifestCollection: MANIFEST_COLLECTION,
      functions: Object.fromEntries(FUNCTION_ROLES.map((r) => [r, functions[r].name])),
      verifyServiceAccount: accounts.verify.email,
    });
  }
}

/**
 * The Secret Manager secret holding the PostGIS sink URL, its one version (the value a Pulumi secret, so encrypted
 * in the state), and the one grant on it: Secret Accessor for the tile function's account. No project-level role
 * reaches it, so no other function can read it.
 */
function featureSinkSecret(
  owner: pulumi.Resource,
  name: string,
  args: {
    readonly project: pulumi.Input<string>;
    readonly secretId: string;
    readonly region: string;
    readonly url: pulumi.Input<string>;
    readonly reader: pulumi.Input<string>;
    readonly labels: Record<string, string>;
    readonly afterApis: pulumi.CustomResourceOptions;
  },
): { readonly secret: secretmanager.Secret; readonly version: secretmanager.SecretVersion; readonly grant: secretmanager.SecretIamMember } {
  const parent = { parent: owner };
  const secret = new secretmanager.Secret(
    name,
    {
      project: args.project,
      secretId: args.secretId,
      // Replicated in the stack's region only: the credential goes no further than the function that uses it.
      replication: { userManaged: { replicas: [{ location: args.region }] } },
      labels: args.labels,
    },
    args.afterApis,
  );
  const version = new secretmanager.SecretVersion(name, { secret: secret.id, secretData: pulumi.secret(args.url) }, parent);
  const grant = new secretmanager.SecretIamMember(
    `${name}-tile-reader`,
    { project: args.project, secretId: secret.secretId, role: 'roles/secretmanager.secretAccessor', member: args.reader },
    parent,
  );
  return { secret, version, grant };
}
