import { describe, expect, it } from 'vitest';
import { GCP_ENTRY_POINTS } from '../../infra/common/packaging.js';
import { GCP_TELEMETRY_ROLES } from '../../infra/gcp/telemetry.js';
import { LEASE_STOLEN_LOG_FILTER, VERIFY_TAP_PERMISSIONS } from '../../infra/gcp/tiling-stack.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { CEILINGS, type Platform } from '../../shared/domain/ceilings.js';
import {
  AREAS,
  type Area,
  type AreaName,
  accessOf,
  areaPrefix,
  DEFAULT_SOURCE_PREFIX,
  FUNCTION_ROLES,
  type FunctionRole,
  type ObjectAccess,
  outputKeys,
  ROLE_ACCESS,
  type StoreName,
  SWEEP_STATE_KEY,
  sceneLifecycleKeys,
} from '../../shared/domain/key-layout.js';
import { ENV, parseRuntimeConfig } from '../../shared/domain/runtime-config.js';
import { evaluateCel, GCP_PREDEFINED_ROLES, parseCel } from '../support/iam/grants-gcp.js';
import {
  declaredUrns,
  envOf,
  GCP_PROJECT_NUMBER,
  missingBefore,
  type RecordedResource,
  refusal,
  runStack,
  type StackRun,
} from './harness.js';
import { loadStackFile } from './stack-files.js';

/**
 * Policies of the GCP stack, asserted on what the program declares under
 * Pulumi mocks. Only the GCP SDK is loaded in this file.
 */

const STACK = 'gcp-europe-west1';
/** The project the example stack file names. */
const PROJECT = 'my-tessera-project';
const BASE = { 'tessera:cloud': 'gcp', 'tessera:region': 'europe-west1', 'gcp:region': 'europe-west1', 'gcp:project': PROJECT };

const FN = 'gcp:cloudfunctionsv2/function:Function';
const functions = (run: StackRun) => run.ofType(FN);
const entryPoint = (fn: RecordedResource) => (fn.inputs.buildConfig as { entryPoint: string }).entryPoint;
/** The function deployed with a role's entry point. */
function byRole(run: StackRun, role: keyof typeof GCP_ENTRY_POINTS): RecordedResource {
  const fn = functions(run).find((f) => entryPoint(f) === GCP_ENTRY_POINTS[role]);
  if (!fn) throw new Error(`no function with entry point ${GCP_ENTRY_POINTS[role]}`);
  return fn;
}
/** The Cloud Run service URI the provider reports (serviceConfig.uri). */
const runUri = (fn: RecordedResource) => (fn.state.serviceConfig as { uri: string }).uri;
/** The service account whose logical name ends with `suffix`. */
const byName = (run: StackRun, suffix: string) => run.one('gcp:serviceaccount/account:Account', suffix);
const serviceConfig = (fn: RecordedResource) =>
  fn.inputs.serviceConfig as {
    timeoutSeconds: number;
    environmentVariables: Record<string, string>;
    serviceAccountEmail: string;
    ingressSettings: string;
  };

describe('the GCP stack (Pulumi.gcp-europe-west1.yaml under mocks)', () => {
  let run: StackRun;

  it('runs the example stack file as it is shipped', async () => {
    const file = loadStackFile('Pulumi.gcp-europe-west1.yaml');
    expect(file.stack).toBe(STACK);
    run = await runStack(file.stack, file.config);
    expect(run.outputs).toMatchObject({
      cloud: 'gcp',
      platform: 'gcf2-event',
      functionTimeoutSeconds: 540,
      leaseSeconds: 840,
      tileAckDeadlineSeconds: 600,
    });
  });

  it('builds one tessera:gcp:TilingStack component and parents every resource to it', () => {
    expect(run.ofType('tessera:gcp:TilingStack')).toHaveLength(1);
    const custom = declaredUrns(run);
    expect(custom.length).toBeGreaterThan(40);
    for (const urn of custom) expect(urn, urn).toContain('tessera:gcp:TilingStack$');
  });

  it('gives every function a lease longer than the ceiling of its trigger type, and a timeout within it', () => {
    expect(functions(run)).toHaveLength(6);
    for (const fn of functions(run)) {
      const sc = serviceConfig(fn);
      const env = envOf(sc.environmentVariables);
      const platform = env[ENV.platform] as Platform;
      const ceiling = CEILINGS[platform].ceilingSec ?? sc.timeoutSeconds;
      expect(sc.timeoutSeconds, fn.name).toBeLessThanOrEqual(ceiling);
      expect(Number(env[ENV.leaseSeconds]), fn.name).toBeGreaterThan(ceiling);
      expect(Number(env[ENV.functionTimeoutSeconds])).toBe(sc.timeoutSeconds);
      expect(() => parseRuntimeConfig(env), fn.name).not.toThrow();
    }
    // Event-driven functions (the Eventarc scene trigger) stay within 540 s whatever the tile trigger is.
    const scene = byRole(run, 'scene');
    expect(scene && envOf(serviceConfig(scene).environmentVariables)[ENV.platform]).toBe('gcf2-event');
  });

  it('builds every function as Cloud Functions 2nd gen on Node 24 (GA there: shared/domain/runtimes.ts) from the uploaded source archive, with its own entry point', () => {
    const source = run.ofType('gcp:storage/bucketObject:BucketObject')[0];
    expect(source?.inputs.name).toMatch(/^functions\/source-[0-9a-f]{16}\.zip$/);
    const entryPoints = functions(run).map((fn) => {
      const build = fn.inputs.buildConfig as {
        runtime: string;
        entryPoint: string;
        source: { storageSource: { bucket: string; object: string } };
      };
      expect(build.runtime).toBe('nodejs24');
      expect(build.source.storageSource).toEqual({ bucket: source?.inputs.bucket, object: source?.state.name });
      return build.entryPoint;
    });
    expect(entryPoints.sort()).toEqual(Object.values(GCP_ENTRY_POINTS).sort());
  });

  it('refuses a stack that pins nodejs20, decommissioned on 2026-10-30, and names nodejs22', async () => {
    const message = await refusal(STACK, { ...BASE, 'tessera:runtime': 'nodejs20' });
    expect(message).toMatch(/Cloud Run functions refuses creating functions on nodejs20 since 2026-10-30; use nodejs22/);
  });

  it('pushes tile jobs with an ack deadline that covers the tile timeout, a retry policy and a dead-letter topic', () => {
    const tile = byRole(run, 'tile');
    const topic = run.one('gcp:pubsub/topic:Topic', '-tiles');
    const deadLetter = run.one('gcp:pubsub/topic:Topic', '-tiles-dead-letter');
    const sub = run.one('gcp:pubsub/subscription:Subscription', '-tiles');
    expect(sub.inputs.topic).toBe(topic.state.id);
    expect(sub.inputs.ackDeadlineSeconds).toBeGreaterThanOrEqual(serviceConfig(tile).timeoutSeconds);
    expect(sub.inputs.retryPolicy).toEqual({ minimumBackoff: '10s', maximumBackoff: '600s' });
    expect(sub.inputs.deadLetterPolicy).toEqual({ deadLetterTopic: deadLetter.state.id, maxDeliveryAttempts: 5 });
    const push = sub.inputs.pushConfig as { pushEndpoint: string; oidcToken: { serviceAccountEmail: string; audience: string } };
    expect(push.pushEndpoint).toBe(`${runUri(tile)}/projects/${PROJECT}/topics/${topic.state.name}`);
    expect(push.oidcToken.audience).toBe(runUri(tile));
  });

  it('pushes to the Cloud Run service URI (run.app), never the function url (cloudfunctions.net), which internal ingress refuses', () => {
    const tile = byRole(run, 'tile');
    // The mocks give the two different values, as GCP does.
    expect(tile.state.url).toMatch(/cloudfunctions\.net/);
    expect(runUri(tile)).toMatch(/\.run\.app$/);
    const sub = run.one('gcp:pubsub/subscription:Subscription', '-tiles');
    const push = sub.inputs.pushConfig as { pushEndpoint: string; oidcToken: { audience: string } };
    expect(push.pushEndpoint.startsWith(`${runUri(tile)}/`)).toBe(true);
    expect(push.oidcToken.audience).toBe(runUri(tile));
    for (const r of run.resources) expect(JSON.stringify(r.inputs), r.name).not.toContain('cloudfunctions.net');
    // The first pushes come at once: the trigger account's invoker grant on the tile service exists before the subscription.
    expect(missingBefore(run, sub, [run.one('gcp:cloudrunv2/serviceIamMember:ServiceIamMember', '-tile-invoker')])).toEqual([]);
  });

  it('gives every subscription a dead-letter path, and keeps the dead letters in a subscription of their own', () => {
    const deadLetter = run.one('gcp:pubsub/topic:Topic', '-tiles-dead-letter');
    const ingestDeadLetter = run.one('gcp:pubsub/topic:Topic', '-ingest-dead-letter');
    const deadLetterIds = [deadLetter.state.id, ingestDeadLetter.state.id];
    for (const sub of run.ofType('gcp:pubsub/subscription:Subscription')) {
      const isDeadLetterStore = deadLetterIds.includes(sub.inputs.topic);
      expect(
        isDeadLetterStore ||
          deadLetterIds.includes((sub.inputs.deadLetterPolicy as { deadLetterTopic?: string } | undefined)?.deadLetterTopic),
        sub.name,
      ).toBe(true);
    }
    for (const id of deadLetterIds)
      expect(run.ofType('gcp:pubsub/subscription:Subscription').filter((s) => s.inputs.topic === id)).toHaveLength(1);
    // Each push subscription dead-letters into its own topic: a poison ingest request is never mixed with tile jobs.
    expect(
      (run.one('gcp:pubsub/subscription:Subscription', '-ingest').inputs.deadLetterPolicy as { deadLetterTopic: string }).deadLetterTopic,
    ).toBe(ingestDeadLetter.state.id);
    // Pub/Sub's own agent forwards dead letters: publisher on the topic, subscriber on the source subscription.
    const agent = `serviceAccount:service-${GCP_PROJECT_NUMBER}@gcp-sa-pubsub.iam.gserviceaccount.com`;
    expect(
      run
        .ofType('gcp:pubsub/topicIAMMember:TopicIAMMember')
        .some((m) => m.inputs.member === agent && m.inputs.topic === deadLetter.state.name),
    ).toBe(true);
    expect(
      run
        .ofType('gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember')
        .some((m) => m.inputs.member === agent && m.inputs.role === 'roles/pubsub.subscriber'),
    ).toBe(true);
  });

  it('keeps claims in a Firestore database of its own with point-in-time recovery and a TTL policy on expires_at of the configured collection', () => {
    const db = run.ofType('gcp:firestore/database:Database')[0];
    expect(db?.inputs).toMatchObject({
      name: `tessera-${STACK}`,
      type: 'FIRESTORE_NATIVE',
      pointInTimeRecoveryEnablement: 'POINT_IN_TIME_RECOVERY_ENABLED',
      locationId: 'europe-west1',
    });
    const field = run.ofType('gcp:firestore/field:Field')[0];
    expect(field?.inputs).toMatchObject({ database: `tessera-${STACK}`, collection: 'claims', field: 'expires_at', ttlConfig: {} });
    for (const fn of functions(run)) {
      expect(envOf(serviceConfig(fn).environmentVariables)).toMatchObject({
        [ENV.claimsTable]: 'claims',
        [ENV.firestoreDatabase]: `tessera-${STACK}`,
      });
    }
  });

  it('never creates the (default) Firestore database, which many projects have already (409); "(default)" adopts it', async () => {
    for (const db of run.ofType('gcp:firestore/database:Database')) expect(db.inputs.name).not.toBe('(default)');
    const adopt = await runStack(STACK, { ...BASE, 'tessera:gcpFirestoreDatabase': '(default)' });
    expect(adopt.ofType('gcp:firestore/database:Database')).toHaveLength(0);
    expect(adopt.ofType('gcp:firestore/field:Field')[0]?.inputs.database).toBe('(default)');
    for (const fn of functions(adopt)) expect(envOf(serviceConfig(fn).environmentVariables)[ENV.firestoreDatabase]).toBeUndefined();
    const claims = adopt.one('gcp:projects/iAMMember:IAMMember', '-tile-claims');
    expect((claims.inputs.condition as { expression: string }).expression).toContain(`projects/${PROJECT}/databases/(default)`);
    expect(await refusal(STACK, { ...BASE, 'tessera:gcpFirestoreDatabase': 'Claims_DB' })).toContain(
      'tessera:gcpFirestoreDatabase must be',
    );
  });

  it('triggers the scene and stream functions on object finalize in the source bucket only, and tells them the prefix and suffix', () => {
    const sources = run.one('gcp:storage/bucket:Bucket', '-sources');
    const triggered = functions(run).filter((f) => f.inputs.eventTrigger !== undefined);
    // The stream function takes the same events and keeps those under streams/ (docs/feature-batches.md): Eventarc filters by bucket only.
    expect(triggered.map(entryPoint)).toEqual([GCP_ENTRY_POINTS.scene, GCP_ENTRY_POINTS.stream]);
    for (const fn of triggered) {
      expect(fn.inputs.eventTrigger, fn.name).toMatchObject({
        eventType: 'google.cloud.storage.object.v1.finalized',
        eventFilters: [{ attribute: 'bucket', value: sources.state.name }],
        retryPolicy: 'RETRY_POLICY_RETRY',
      });
    }
    const env = envOf(serviceConfig(triggered[0] as RecordedResource).environmentVariables);
    expect(env).toMatchObject({ [ENV.sourcePrefix]: 'scenes/', [ENV.sourceSuffix]: '.tif' });
  });

  it("lets a web map on tessera:outputCorsOrigins read the output bucket by ranges (tessera view's page, issue 26), and sets no CORS rule by default", async () => {
    for (const b of run.ofType('gcp:storage/bucket:Bucket')) expect(b.inputs.cors, b.name).toBeUndefined();
    const withCors = await runStack(STACK, { ...BASE, 'tessera:outputCorsOrigins': 'https://maps.example.org,http://localhost:8080' });
    const buckets = withCors.ofType('gcp:storage/bucket:Bucket');
    expect(buckets.filter((b) => b.inputs.cors !== undefined).map((b) => b.name)).toEqual([
      withCors.one('gcp:storage/bucket:Bucket', '-outputs').name,
    ]);
    const [rule, ...others] = withCors.one('gcp:storage/bucket:Bucket', '-outputs').inputs.cors as Record<string, string[]>[];
    expect(others).toEqual([]);
    expect(rule?.origins).toEqual(['https://maps.example.org', 'http://localhost:8080']);
    expect(rule?.methods).toEqual(['GET', 'HEAD']);
    // GCS's responseHeaders are both the headers a page may send (Range) and those it may read.
    expect(rule?.responseHeaders).toEqual(expect.arrayContaining(['Range', 'Content-Range', 'ETag', 'Accept-Ranges', 'Content-Length']));
  });

  it('makes nothing public: uniform access, public access prevention, internal ingress, no allUsers anywhere', () => {
    const buckets = run.ofType('gcp:storage/bucket:Bucket');
    expect(buckets).toHaveLength(3);
    for (const b of buckets) expect(b.inputs, b.name).toMatchObject({ uniformBucketLevelAccess: true, publicAccessPrevention: 'enforced' });
    for (const fn of functions(run)) expect(serviceConfig(fn).ingressSettings).toBe('ALLOW_INTERNAL_ONLY');
    const members = run.resources
      .filter((r) => r.type.includes('IAMMember') || r.type.includes('IamMember'))
      .map((r) => String(r.inputs.member));
    expect(members.length).toBeGreaterThan(10);
    for (const m of members) expect(m).not.toMatch(/allUsers|allAuthenticatedUsers/);
  });

  it('runs each function as its own service account with narrow roles', () => {
    const emails = functions(run).map((fn) => serviceConfig(fn).serviceAccountEmail);
    expect(new Set(emails).size).toBe(6);
    const projectRoles = run.ofType('gcp:projects/iAMMember:IAMMember');
    for (const m of projectRoles) {
      expect(m.inputs.role, m.name).not.toMatch(/roles\/(owner|editor|storage\.admin|datastore\.owner|pubsub\.admin)$/);
      if (emails.some((e) => m.inputs.member === `serviceAccount:${e}`)) {
        // The only project-level grants to a function: Firestore, conditioned on the claims database (which also
        // holds the ingest manifest: reconcile only reads it).
        expect(m.inputs.role).toBe(m.name.endsWith('-reconcile-manifest') ? 'roles/datastore.viewer' : 'roles/datastore.user');
        expect(String((m.inputs.condition as { expression: string }).expression)).toContain(`databases/tessera-${STACK}`);
      }
    }
    // Every object grant on the data buckets is conditioned on an area's object names, or is a list-only binding:
    // nothing bucket-wide (the layout checks below say which area).
    const data = [run.one('gcp:storage/bucket:Bucket', '-sources').state.name, run.one('gcp:storage/bucket:Bucket', '-outputs').state.name];
    const lister = run.one('gcp:projects/iAMCustomRole:IAMCustomRole', '-object-lister').state.name;
    const onData = run.ofType('gcp:storage/bucketIAMMember:BucketIAMMember').filter((m) => data.includes(m.inputs.bucket));
    expect(onData.length).toBeGreaterThan(20);
    for (const m of onData) {
      if (m.inputs.role === lister) expect(m.inputs.condition, m.name).toBeUndefined();
      else
        expect(String((m.inputs.condition as { expression?: string } | undefined)?.expression), m.name).toMatch(
          /^resource\.name( == |\.startsWith\()"projects\/_\/buckets\/[^/"]+\/objects\//,
        );
    }
  });

  it("points every function's environment at this stack's buckets, topics and project", () => {
    const expected = {
      [ENV.sourceBucket]: run.one('gcp:storage/bucket:Bucket', '-sources').state.name,
      [ENV.outputBucket]: run.one('gcp:storage/bucket:Bucket', '-outputs').state.name,
      [ENV.tileQueue]: run.one('gcp:pubsub/topic:Topic', '-tiles').state.name,
      [ENV.gcpProject]: PROJECT,
    };
    for (const fn of functions(run)) expect(envOf(serviceConfig(fn).environmentVariables), fn.name).toMatchObject(expected);
    // Each push-triggered function settles poison in its own subscription's dead-letter topic.
    const dlqOf = (role: 'scene' | 'tile' | 'mosaic' | 'ingest') =>
      envOf(serviceConfig(byRole(run, role)).environmentVariables)[ENV.deadLetterQueue];
    for (const role of ['scene', 'tile', 'mosaic'] as const)
      expect(dlqOf(role), role).toBe(run.one('gcp:pubsub/topic:Topic', '-tiles-dead-letter').state.name);
    expect(dlqOf('ingest')).toBe(run.one('gcp:pubsub/topic:Topic', '-ingest-dead-letter').state.name);
  });

  it('counts lease-stolen log lines of its own functions and alerts on them', () => {
    const metric = run.ofType('gcp:logging/metric:Metric')[0];
    const filter = String(metric?.inputs.filter);
    expect(filter).toContain(LEASE_STOLEN_LOG_FILTER);
    // Cloud Run logs name the service by its short name, the last part of serviceConfig.service.
    for (const fn of functions(run))
      expect(filter).toContain(`"${(fn.state.serviceConfig as { service: string }).service.split('/').at(-1)}"`);
    expect(filter).not.toContain('projects/');
    // Cloud Run puts a JSON line in jsonPayload: each jsonPayload.<field>="<value>" term holds on the core's log line.
    const lines: string[] = [];
    new JsonTelemetry((l) => lines.push(l)).log('ERROR', 'lease-stolen', { jobKey: 'k' });
    const logged = JSON.parse(lines[0] as string) as Record<string, unknown>;
    const terms = [...LEASE_STOLEN_LOG_FILTER.matchAll(/jsonPayload\.(\w+)="([^"]+)"/g)];
    expect(terms).toHaveLength(2);
    for (const [, field, value] of terms) expect(logged[field as string]).toBe(value);
    const alerts = run.ofType('gcp:monitoring/alertPolicy:AlertPolicy');
    const leaseAlert = alerts.find((a) => JSON.stringify(a.inputs.conditions).includes('conditionMatchedLog')) as RecordedResource;
    expect((leaseAlert.inputs.conditions as { conditionMatchedLog: { filter: string } }[])[0]?.conditionMatchedLog.filter).toBe(filter);
    // Log-match alerts must say how often they may notify.
    expect(leaseAlert.inputs.alertStrategy).toMatchObject({ notificationRateLimit: { period: '300s' } });
    expect(alerts.some((a) => JSON.stringify(a.inputs.conditions).includes('num_undelivered_messages'))).toBe(true);
  });

  it('names no log-based metric of its own in an alert policy (404 for up to 10 minutes after the metric is created)', () => {
    const alerts = run.ofType('gcp:monitoring/alertPolicy:AlertPolicy');
    // Lease stolen, tile dead letters, ingest dead letters.
    expect(alerts).toHaveLength(3);
    for (const a of alerts) expect(JSON.stringify(a.inputs.conditions), a.name).not.toContain('logging.googleapis.com/user/');
  });

  it('sends lease-stolen and dead-letter alerts to tessera:alertEmail when it is set', async () => {
    expect(run.ofType('gcp:monitoring/notificationChannel:NotificationChannel')).toHaveLength(0);
    const mailed = await runStack(STACK, { ...BASE, 'tessera:alertEmail': 'ops@example.org' });
    const channel = mailed.one('gcp:monitoring/notificationChannel:NotificationChannel', '-alerts');
    expect(channel.inputs).toMatchObject({ type: 'email', labels: { email_address: 'ops@example.org' } });
    for (const a of mailed.ofType('gcp:monitoring/alertPolicy:AlertPolicy'))
      expect(a.inputs.notificationChannels).toEqual([channel.state.name]);
  });

  it('sweeps for finished mosaics from Cloud Scheduler, authenticated, without retries', () => {
    const mosaic = byRole(run, 'mosaic');
    const job = run.one('gcp:cloudscheduler/job:Job', '-mosaic-sweep');
    expect(job?.inputs).toMatchObject({ schedule: '*/5 * * * *', retryConfig: { retryCount: 0 } });
    const target = job?.inputs.httpTarget as { uri: string; oidcToken: { audience: string } } | undefined;
    expect(target?.uri).toBe(runUri(mosaic));
    expect(target?.oidcToken.audience).toBe(runUri(mosaic));
    expect(
      missingBefore(run, job as RecordedResource, [run.one('gcp:cloudrunv2/serviceIamMember:ServiceIamMember', '-mosaic-invoker')]),
    ).toEqual([]);
    expect(envOf(serviceConfig(mosaic).environmentVariables)[ENV.platform]).toBe('gcf2-http');
  });

  it('runs the tile worker for up to an hour when the tile trigger is http, with a lease above 3,600 s', async () => {
    const http = await runStack(STACK, { ...BASE, 'tessera:gcpTileTrigger': 'http' });
    expect(http.outputs).toMatchObject({ platform: 'gcf2-http', functionTimeoutSeconds: 3600, leaseSeconds: 3900 });
    const tile = byRole(http, 'tile');
    expect(serviceConfig(tile).timeoutSeconds).toBe(3600);
    expect(envOf(serviceConfig(tile).environmentVariables)[ENV.platform]).toBe('gcf2-http');
  });

  it('refuses a lease at or below the trigger ceiling at preview, saying what to set', async () => {
    const event = await refusal(STACK, { ...BASE, 'tessera:leaseSeconds': '540' });
    expect(event).toContain('tessera:leaseSeconds');
    expect(event).toContain('at least 541 s');
    const http = await refusal(STACK, { ...BASE, 'tessera:gcpTileTrigger': 'http', 'tessera:leaseSeconds': '3600' });
    expect(http).toContain('at least 3601 s');
  });

  it('refuses an event-driven timeout above 540 s, pointing at the http trigger', async () => {
    expect(await refusal(STACK, { ...BASE, 'tessera:functionTimeoutSeconds': '900' })).toMatch(/540 s or less.*HTTP-triggered function/s);
  });

  it('refuses fewer than 5 delivery attempts (Pub/Sub minimum) and a missing project', async () => {
    expect(await refusal(STACK, { ...BASE, 'tessera:maxReceiveCount': '3' })).toContain(
      'tessera:maxReceiveCount must be a whole number from 5 to 100',
    );
    const { 'gcp:project': _omitted, ...noProject } = BASE;
    expect(await refusal(STACK, noProject)).toContain('pulumi config set gcp:project');
  });

  it('enables the IAM and Resource Manager APIs, and grants nothing in the project before they are on', () => {
    const services = run.ofType('gcp:projects/service:Service');
    const names = services.map((x) => x.inputs.service);
    expect(names).toEqual(expect.arrayContaining(['iam.googleapis.com', 'cloudresourcemanager.googleapis.com']));
    const apis = services.filter((x) => ['iam.googleapis.com', 'cloudresourcemanager.googleapis.com'].includes(String(x.inputs.service)));
    for (const m of [...run.ofType('gcp:projects/iAMMember:IAMMember'), ...run.ofType('gcp:serviceaccount/account:Account')])
      expect(missingBefore(run, m, apis), m.name).toEqual([]);
  });

  it("creates the scene function (and its Eventarc trigger) only after the trigger's grants, the Eventarc agent's role and a propagation wait", () => {
    const scene = byRole(run, 'scene');
    const agent = run.one('gcp:projects/serviceIdentity:ServiceIdentity', '-eventarc-agent');
    expect(agent.inputs.service).toBe('eventarc.googleapis.com');
    const agentRole = run.one('gcp:projects/iAMMember:IAMMember', '-eventarc-agent-role');
    expect(agentRole.inputs).toMatchObject({ role: 'roles/eventarc.serviceAgent', member: agent.state.member });
    const receiver = run.one('gcp:projects/iAMMember:IAMMember', '-trigger-receiver');
    expect(receiver.inputs).toMatchObject({ role: 'roles/eventarc.eventReceiver', member: byName(run, '-trigger').state.member });
    const gcsAgent = run.one('gcp:projects/iAMMember:IAMMember', '-gcs-agent-publisher');
    expect(gcsAgent.inputs).toMatchObject({ role: 'roles/pubsub.publisher', member: expect.stringMatching(/@gs-project-accounts\./) });
    const wait = run.one('time:index/sleep:Sleep', '-iam-propagation');
    expect(wait.inputs.createDuration).toBe('120s');
    // The wait itself comes after every grant it is waiting for.
    expect(missingBefore(run, wait, [receiver, gcsAgent, agentRole])).toEqual([]);
    expect(missingBefore(run, scene, [receiver, gcsAgent, agentRole, wait, agent])).toEqual([]);
    // The graph discriminates: the tile function has no Eventarc trigger and is not held back by the wait.
    expect(missingBefore(run, byRole(run, 'tile'), [receiver, wait])).toEqual(['tessera-trigger-receiver', 'tessera-iam-propagation']);
  });

  it('builds every function as a dedicated Cloud Build account that holds its roles before the build starts', () => {
    const build = byName(run, '-build');
    const grants = [
      ...run.ofType('gcp:projects/iAMMember:IAMMember').filter((m) => m.inputs.member === build.state.member),
      ...run.ofType('gcp:storage/bucketIAMMember:BucketIAMMember').filter((m) => m.inputs.member === build.state.member),
    ];
    expect(grants.map((g) => g.inputs.role).sort()).toEqual([
      'roles/artifactregistry.writer',
      'roles/logging.logWriter',
      'roles/storage.objectViewer',
    ]);
    const artifacts = run.one('gcp:storage/bucket:Bucket', '-artifacts');
    expect(grants.find((g) => g.inputs.role === 'roles/storage.objectViewer')?.inputs.bucket).toBe(artifacts.state.name);
    for (const fn of functions(run)) {
      expect((fn.inputs.buildConfig as { serviceAccount: string }).serviceAccount, fn.name).toBe(build.state.id);
      expect(missingBefore(run, fn, grants), fn.name).toEqual([]);
    }
  });

  it('lets scene, tile and stream (and the Pub/Sub agent) publish poison to the dead-letter topic, granted on that topic only', () => {
    const deadLetter = run.one('gcp:pubsub/topic:Topic', '-tiles-dead-letter');
    const agent = run.ofType('gcp:projects/serviceIdentity:ServiceIdentity').find((a) => a.name.endsWith('-pubsub-agent'));
    const publishers = run
      .ofType('gcp:pubsub/topicIAMMember:TopicIAMMember')
      .filter((m) => m.inputs.topic === deadLetter.state.name && m.inputs.role === 'roles/pubsub.publisher')
      .map((m) => m.inputs.member);
    // The scene handler publishes a scene event no retry can cure there (functions/gcp/handlers/scene.handler.ts).
    expect(publishers.sort()).toEqual(
      [
        byName(run, '-scene').state.member,
        byName(run, '-tile').state.member,
        byName(run, '-stream').state.member,
        agent?.state.member,
      ].sort(),
    );
    // The scene account publishes to two topics and holds no Pub/Sub role on the project.
    const scene = byName(run, '-scene').state.member;
    const sceneTopics = run
      .ofType('gcp:pubsub/topicIAMMember:TopicIAMMember')
      .filter((m) => m.inputs.member === scene)
      .map((m) => m.inputs.topic);
    expect(sceneTopics.sort()).toEqual([deadLetter.state.name, run.one('gcp:pubsub/topic:Topic', '-tiles').state.name].sort());
    expect(run.ofType('gcp:projects/iAMMember:IAMMember').filter((m) => m.inputs.member === scene)).toEqual([]);
    // And it is told which topic that is.
    expect(envOf(serviceConfig(byRole(run, 'scene')).environmentVariables)[ENV.deadLetterQueue]).toBe(deadLetter.state.name);
  });

  it("tells the tile function its subscription's maxDeliveryAttempts (TESSERA_MAX_DELIVERIES), and scene and mosaic none", async () => {
    // A count other than Pub/Sub's minimum, which the tile handler assumes when unset.
    const set = await runStack(STACK, { ...BASE, 'tessera:maxReceiveCount': '8' });
    const sub = set.one('gcp:pubsub/subscription:Subscription', '-tiles');
    const attempts = (sub.inputs.deadLetterPolicy as { maxDeliveryAttempts: number }).maxDeliveryAttempts;
    expect(attempts).toBe(8);
    const tile = envOf(serviceConfig(byRole(set, 'tile')).environmentVariables);
    expect(tile[ENV.maxDeliveries]).toBe(String(attempts));
    expect(parseRuntimeConfig(tile).maxDeliveries).toBe(attempts);
    // Scene runs from Eventarc (retried for a day, no count), mosaic from Cloud Scheduler.
    for (const role of ['scene', 'mosaic'] as const) {
      expect(envOf(serviceConfig(byRole(set, role)).environmentVariables)[ENV.maxDeliveries], role).toBeUndefined();
    }
  });

  it('lets the tile function publish fan-out chunks to the tile topic, and only the tile function, scene and verify publish there', () => {
    const topic = run.one('gcp:pubsub/topic:Topic', '-tiles');
    const publishers = run
      .ofType('gcp:pubsub/topicIAMMember:TopicIAMMember')
      .filter((m) => m.inputs.topic === topic.state.name && m.inputs.role === 'roles/pubsub.publisher')
      .map((m) => m.inputs.member);
    // verify replays its scene's fan-out and sends its poison probe there (docs/deploy.md, step 4).
    expect(publishers.sort()).toEqual(
      [byName(run, '-scene').state.member, byName(run, '-tile').state.member, byName(run, '-verify').state.member].sort(),
    );
  });

  it('pushes ingest requests to the ingest function with a retry policy, its own dead-letter topic and the deliveries it is told', async () => {
    const ingest = byRole(run, 'ingest');
    const sub = run.one('gcp:pubsub/subscription:Subscription', '-ingest');
    const topic = run.one('gcp:pubsub/topic:Topic', '-ingest');
    expect(sub.inputs.topic).toBe(topic.state.id);
    expect(sub.inputs).toMatchObject({ ackDeadlineSeconds: 600, retryPolicy: { minimumBackoff: '10s', maximumBackoff: '600s' } });
    // The push deadline covers the ingest timeout (540 s, event-driven).
    expect(serviceConfig(ingest).timeoutSeconds).toBeLessThanOrEqual(sub.inputs.ackDeadlineSeconds as number);
    const push = sub.inputs.pushConfig as { pushEndpoint: string; oidcToken: { audience: string } };
    expect(push.pushEndpoint.startsWith(runUri(ingest))).toBe(true);
    expect(push.oidcToken.audience).toBe(runUri(ingest));
    expect(missingBefore(run, sub, [run.one('gcp:cloudrunv2/serviceIamMember:ServiceIamMember', '-ingest-invoker')])).toEqual([]);
    const env = envOf(serviceConfig(ingest).environmentVariables);
    expect(env).toMatchObject({ [ENV.manifestTable]: 'ingest-manifest', [ENV.ingestQueue]: topic.state.name, [ENV.maxDeliveries]: '5' });
    expect(env[ENV.platform]).toBe('gcf2-event');
    expect(run.outputs).toMatchObject({ ingestTopic: topic.state.name, manifestCollection: 'ingest-manifest' });
    const set = await runStack(STACK, { ...BASE, 'tessera:maxReceiveCount': '8' });
    expect(envOf(serviceConfig(byRole(set, 'ingest')).environmentVariables)[ENV.maxDeliveries]).toBe('8');
    // Only the ingest function and Pub/Sub's agent publish to the ingest dead-letter topic.
    const deadLetter = run.one('gcp:pubsub/topic:Topic', '-ingest-dead-letter');
    const agent = run.ofType('gcp:projects/serviceIdentity:ServiceIdentity').find((a) => a.name.endsWith('-pubsub-agent'));
    const publishers = run
      .ofType('gcp:pubsub/topicIAMMember:TopicIAMMember')
      .filter((m) => m.inputs.topic === deadLetter.state.name)
      .map((m) => m.inputs.member);
    expect(publishers.sort()).toEqual([byName(run, '-ingest').state.member, agent?.state.member].sort());
    // And an alert when its dead-letter subscription holds a message, as for tile jobs.
    const ingestDeadLetterSub = run.one('gcp:pubsub/subscription:Subscription', '-ingest-dead-letter').state.name;
    const alertPolicy = run.one('gcp:monitoring/alertPolicy:AlertPolicy', '-ingest-dead-letters');
    expect(JSON.stringify(alertPolicy.inputs.conditions)).toContain(`resource.labels.subscription_id=\\"${ingestDeadLetterSub}\\"`);
  });

  it('deletes ingest staging after tessera:stagingRetentionDays (default 7), matching staging/ of the source bucket only', async () => {
    const rules = (r: StackRun, bucket: string) =>
      (r.one('gcp:storage/bucket:Bucket', bucket).inputs.lifecycleRules ?? []) as {
        action: { type: string };
        condition: { age?: number; matchesPrefixes?: string[] };
      }[];
    const staging = rules(run, '-sources').filter((r) => r.condition.matchesPrefixes !== undefined);
    expect(staging).toEqual([{ action: { type: 'Delete' }, condition: { age: 7, matchesPrefixes: ['staging/'] } }]);
    expect(rules(run, '-outputs').some((r) => r.condition.matchesPrefixes !== undefined)).toBe(false);
    const set = await runStack(STACK, { ...BASE, 'tessera:stagingRetentionDays': '14' });
    expect(rules(set, '-sources').find((r) => r.condition.matchesPrefixes)?.condition.age).toBe(14);
  });

  it('reconciles the manifest weekly from Cloud Scheduler, authenticated, without retries, reading the manifest only', () => {
    const reconcile = byRole(run, 'reconcile');
    const job = run.one('gcp:cloudscheduler/job:Job', '-reconcile');
    expect(job.inputs).toMatchObject({ schedule: '0 3 * * 1', timeZone: 'Etc/UTC', retryConfig: { retryCount: 0 } });
    const target = job.inputs.httpTarget as { uri: string; oidcToken: { audience: string } };
    expect(target.uri).toBe(runUri(reconcile));
    expect(target.oidcToken.audience).toBe(runUri(reconcile));
    expect(missingBefore(run, job, [run.one('gcp:cloudrunv2/serviceIamMember:ServiceIamMember', '-reconcile-invoker')])).toEqual([]);
    const env = envOf(serviceConfig(reconcile).environmentVariables);
    expect(env[ENV.manifestTable]).toBe('ingest-manifest');
    expect(env[ENV.platform]).toBe('gcf2-http');
    const grant = run.one('gcp:projects/iAMMember:IAMMember', '-reconcile-manifest');
    expect(grant.inputs.role).toBe('roles/datastore.viewer');
    expect(String((grant.inputs.condition as { expression: string }).expression)).toContain(`databases/tessera-${STACK}`);
  });
});

/** Pulumi's wire form of a secret value (mocks record it as is): `{ <sig>: <secret sig>, value }`. */
const SECRET_SIG = '4dabf18193072939515e22adb298388d';
const reveal = (v: unknown): { readonly secret: boolean; readonly value: unknown } =>
  typeof v === 'object' && v !== null && SECRET_SIG in v
    ? { secret: true, value: (v as unknown as { value: unknown }).value }
    : { secret: false, value: v };

describe('the GCP stack with tessera:featureSinkUrl (the PostGIS sink, docs/postgis.md)', () => {
  // Recognisable, so that a search of every resource finds any copy: the whole URL or its password alone.
  const PASSWORD = 'pw-7f3a9c1e-sink';
  const URL = `postgis://tessera:${PASSWORD}@10.0.0.5:5432/gis`;
  let set: StackRun;
  const secretOf = (run: StackRun) => run.one('gcp:secretmanager/secret:Secret', '-feature-sink');
  const versionOf = (run: StackRun) => run.one('gcp:secretmanager/secretVersion:SecretVersion', '-feature-sink');
  interface ServiceConfig {
    readonly environmentVariables: unknown;
    readonly secretEnvironmentVariables?: unknown;
  }
  const config = (fn: RecordedResource) => reveal(fn.inputs.serviceConfig).value as ServiceConfig;

  it('keeps the URL in one resource of the stack: the Secret Manager version, as a Pulumi secret, in the stack region only', async () => {
    set = await runStack(STACK, { ...BASE, 'tessera:featureSinkUrl': URL });
    const holders = set.resources.filter((r) => JSON.stringify([r.inputs, r.state]).includes(PASSWORD));
    expect(holders.map((r) => r.type)).toEqual(['gcp:secretmanager/secretVersion:SecretVersion']);
    expect(reveal(versionOf(set).inputs.secretData)).toEqual({ secret: true, value: URL });
    expect(versionOf(set).inputs.secret).toBe(secretOf(set).state.id);
    expect(secretOf(set).inputs).toMatchObject({
      project: PROJECT,
      secretId: `tessera-${STACK}-feature-sink`,
      replication: { userManaged: { replicas: [{ location: 'europe-west1' }] } },
    });
    expect(JSON.stringify(set.outputs)).not.toContain(PASSWORD);
  });

  it('gives the tile and stream functions alone a secret environment variable, pinned to the version the stack wrote, and no function the URL', () => {
    expect(functions(set)).toHaveLength(6);
    for (const fn of functions(set)) {
      // Runtime and build environments, and everything else the function is declared with.
      expect(JSON.stringify(fn.inputs), fn.name).not.toContain(PASSWORD);
      expect(envOf(config(fn).environmentVariables)[ENV.featureSink], fn.name).toBeUndefined();
      expect(reveal(fn.inputs.serviceConfig).secret, fn.name).toBe(false);
      // The stream function writes its batches into the same PostGIS (docs/feature-batches.md).
      const isTile = entryPoint(fn) === GCP_ENTRY_POINTS.tile || entryPoint(fn) === GCP_ENTRY_POINTS.stream;
      expect(config(fn).secretEnvironmentVariables, fn.name).toEqual(
        isTile
          ? [{ key: ENV.featureSink, projectId: PROJECT, secret: secretOf(set).inputs.secretId, version: versionOf(set).state.version }]
          : undefined,
      );
    }
  });

  it("lets the tile and stream functions' accounts alone read the secret, and creates each function once its grant has propagated", () => {
    const onSecrets = [
      ...set.ofType('gcp:secretmanager/secretIamMember:SecretIamMember'),
      ...set.ofType('gcp:secretmanager/secretIamBinding:SecretIamBinding'),
      ...set.ofType('gcp:secretmanager/secretIamPolicy:SecretIamPolicy'),
    ];
    expect(onSecrets.map((g) => [g.inputs.secretId, g.inputs.role, g.inputs.member])).toEqual([
      [secretOf(set).inputs.secretId, 'roles/secretmanager.secretAccessor', byName(set, '-tile').state.member],
      [secretOf(set).inputs.secretId, 'roles/secretmanager.secretAccessor', byName(set, '-stream').state.member],
    ]);
    // No project-wide grant reaches the secret by another path.
    const projectRoles = set.ofType('gcp:projects/iAMMember:IAMMember').map((m) => String(m.inputs.role));
    expect(projectRoles.filter((r) => r.startsWith('roles/secretmanager.') || ['roles/owner', 'roles/editor'].includes(r))).toEqual([]);
    for (const custom of set.ofType('gcp:projects/iAMCustomRole:IAMCustomRole')) {
      expect(
        (custom.inputs.permissions as string[]).filter((p) => p.startsWith('secretmanager.')),
        custom.name,
      ).toEqual([]);
    }
    const wait = set.one('time:index/sleep:Sleep', '-iam-propagation');
    expect(missingBefore(set, wait, onSecrets)).toEqual([]);
    expect(missingBefore(set, byRole(set, 'tile'), [onSecrets[0] as RecordedResource, wait, versionOf(set)])).toEqual([]);
    expect(missingBefore(set, byRole(set, 'stream'), [onSecrets[1] as RecordedResource, wait, versionOf(set)])).toEqual([]);
    expect(set.ofType('gcp:projects/service:Service').map((x) => x.inputs.service)).toContain('secretmanager.googleapis.com');
  });

  it('enables no Secret Manager API and declares no secret without the key', async () => {
    const bare = await runStack(STACK, BASE);
    expect(bare.resources.filter((r) => r.type.startsWith('gcp:secretmanager/'))).toEqual([]);
    expect(bare.ofType('gcp:projects/service:Service').map((x) => x.inputs.service)).not.toContain('secretmanager.googleapis.com');
    expect(config(byRole(bare, 'tile')).secretEnvironmentVariables).toBeUndefined();
  });
});

describe('the GCP stack with tessera:stacAssets (multi-file scenes start on their STAC Item, docs/multi-file-scenes.md)', () => {
  it('tells the finalize-triggered scene function to take *.json items and which assets are which band', async () => {
    const run = await runStack(STACK, { ...BASE, 'tessera:stacAssets': '{"B04":"red","B08":"nir"}' });
    const triggered = functions(run).filter((f) => f.inputs.eventTrigger !== undefined);
    expect(triggered.map(entryPoint)).toEqual([GCP_ENTRY_POINTS.scene, GCP_ENTRY_POINTS.stream]);
    // Eventarc filters storage events by bucket only: the handler applies the suffix (and reads the selection).
    const env = envOf(serviceConfig(triggered[0] as RecordedResource).environmentVariables);
    expect(env).toMatchObject({
      [ENV.sourcePrefix]: 'scenes/',
      [ENV.sourceSuffix]: '.json',
      [ENV.stacAssets]: '{"B04":"red","B08":"nir"}',
    });
  });
});

/**
 * Cloud Storage's own semantics, written from Google's documentation and not taken from infra/: which permissions
 * each access of the layout needs (an overwrite is a create plus a delete of the old generation; a listing is
 * checked on the bucket). What the predefined roles hold, and IAM conditions, are evaluated by the enforced-IAM
 * grant model (test/support/iam/grants-gcp.ts).
 */
const NEEDS: Readonly<Record<ObjectAccess, readonly string[]>> = {
  read: ['storage.objects.get'],
  create: ['storage.objects.create'],
  replace: ['storage.objects.create', 'storage.objects.delete'],
  delete: ['storage.objects.delete'],
  list: ['storage.objects.list'],
  // A pin names a generation, read with storage.objects.get.
  pin: [],
};
/**
 * What the program grants a member on one resource of a bucket: the permissions of every binding whose
 * condition holds for it. An object's resource is `projects/_/buckets/B/objects/KEY`; a listing's is the bucket.
 */
function granted(run: StackRun, member: string, bucket: string, key: string | undefined): Set<string> {
  const custom = new Map(
    run.ofType('gcp:projects/iAMCustomRole:IAMCustomRole').map((r) => [String(r.state.name), r.inputs.permissions as string[]]),
  );
  const resource =
    key === undefined
      ? { name: `projects/_/buckets/${bucket}`, type: 'storage.googleapis.com/Bucket' }
      : { name: `projects/_/buckets/${bucket}/objects/${key}`, type: 'storage.googleapis.com/Object' };
  const out = new Set<string>();
  for (const b of run.ofType('gcp:storage/bucketIAMMember:BucketIAMMember')) {
    if (b.inputs.member !== member || b.inputs.bucket !== bucket) continue;
    const role = String(b.inputs.role);
    const permissions = GCP_PREDEFINED_ROLES[role] ?? custom.get(role);
    if (permissions === undefined)
      throw new Error(`${b.name}: role ${role} is neither a known predefined role nor one of the stack's custom roles`);
    const expression = (b.inputs.condition as { expression?: string } | undefined)?.expression;
    if (expression !== undefined && !evaluateCel(parseCel(expression), { ...resource, service: 'storage.googleapis.com' })) continue;
    // storage.objects.list is checked on the bucket and every other object permission on an object.
    for (const p of permissions) if (p.startsWith('storage.objects.') && (p === 'storage.objects.list') === (key === undefined)) out.add(p);
  }
  return out;
}

/** A key in an area: the area's one key, or a name under its prefix. */
const keyIn = (area: AreaName, sourcePrefix: string): string =>
  (AREAS[area] as Area).exact === true ? areaPrefix(area, sourcePrefix) : `${areaPrefix(area, sourcePrefix)}tessera-sample/k.bin`;
const STORES: readonly StoreName[] = ['sources', 'outputs'];

describe('the GCP object grants: every one derived from the key layout (shared/domain/key-layout.ts ROLE_ACCESS)', () => {
  let run: StackRun;
  let bucketOf: Record<StoreName, string>;
  const memberOf = (r: StackRun, role: FunctionRole) => r.one('gcp:serviceaccount/account:Account', `-${role}`).state.member as string;

  it('runs the example stack', async () => {
    run = await runStack(STACK, BASE);
    bucketOf = {
      sources: run.one('gcp:storage/bucket:Bucket', '-sources').state.name as string,
      outputs: run.one('gcp:storage/bucket:Bucket', '-outputs').state.name as string,
    };
  });

  it("grants each role, on a key of each area, exactly the permissions its layout accesses need, and nothing outside the layout's areas", () => {
    for (const role of FUNCTION_ROLES) {
      for (const store of STORES) {
        for (const area of (Object.keys(AREAS) as AreaName[]).filter((a) => AREAS[a].store === store)) {
          const need = new Set(
            accessOf(role, area)
              .filter((a) => a !== 'list')
              .flatMap((a) => NEEDS[a]),
          );
          const has = granted(run, memberOf(run, role), bucketOf[store], keyIn(area, DEFAULT_SOURCE_PREFIX));
          expect([...has].sort(), `${role} on ${area} (${keyIn(area, DEFAULT_SOURCE_PREFIX)})`).toEqual([...need].sort());
        }
        // A key in no area of the layout: no role may touch it.
        expect([...granted(run, memberOf(run, role), bucketOf[store], 'elsewhere/k.bin')], `${role} outside the layout`).toEqual([]);
        // Listing is checked on the bucket: granted exactly to the roles the layout lets list some area there.
        const lists = ROLE_ACCESS[role].some((g) => AREAS[g.area].store === store && g.access.includes('list'));
        expect([...granted(run, memberOf(run, role), bucketOf[store], undefined)], `${role} lists ${store}`).toEqual(
          lists ? NEEDS.list : [],
        );
      }
    }
  });

  it('grants the accesses the issue found denied (issue 24): scene indexes its scene, tile writes chunk markers and tombstones, mosaic rewrites its sweep state', () => {
    const scene = 'a'.repeat(64);
    // Each access checked on its own (soft), so a failure names every one that is missing, not the first.
    const needs = (role: FunctionRole, key: string, permissions: readonly string[]) => {
      const has = granted(run, memberOf(run, role), bucketOf.outputs, key);
      expect
        .soft(
          permissions.filter((p) => !has.has(p)),
          `${role} on ${key}: missing`,
        )
        .toEqual([]);
    };
    needs('scene', sceneLifecycleKeys.indexEntry('2026120104', scene), ['storage.objects.create']);
    needs('tile', sceneLifecycleKeys.chunkDone(scene, 0, 100), ['storage.objects.get', 'storage.objects.create']);
    needs('tile', sceneLifecycleKeys.superseded(scene), ['storage.objects.create']);
    needs('tile', outputKeys.sceneManifest(scene), ['storage.objects.get']);
    // The sweep's compare-and-set rewrite is an overwrite: Cloud Storage wants delete as well as create.
    needs('mosaic', SWEEP_STATE_KEY, ['storage.objects.get', 'storage.objects.create', 'storage.objects.delete']);
    expect
      .soft([...granted(run, memberOf(run, 'mosaic'), bucketOf.outputs, undefined)], 'mosaic lists the output bucket')
      .toEqual(['storage.objects.list']);
  });

  it('binds only objectViewer, objectCreator and two one-permission custom roles, never a role that writes, deletes and updates at once', () => {
    const custom = run.ofType('gcp:projects/iAMCustomRole:IAMCustomRole');
    const storageRoles = custom.filter((r) => (r.inputs.permissions as string[]).some((p) => p.startsWith('storage.')));
    expect(storageRoles.map((r) => [r.inputs.roleId, r.inputs.permissions]).sort()).toEqual([
      ['tessera_gcp_europe_west1_objectDeleter', ['storage.objects.delete']],
      ['tessera_gcp_europe_west1_objectLister', ['storage.objects.list']],
    ]);
    const roles = new Set(
      run
        .ofType('gcp:storage/bucketIAMMember:BucketIAMMember')
        .filter((b) => Object.values(bucketOf).includes(String(b.inputs.bucket)))
        .map((b) => String(b.inputs.role)),
    );
    expect([...roles].sort()).toEqual(
      ['roles/storage.objectCreator', 'roles/storage.objectViewer', ...storageRoles.map((r) => String(r.state.name))].sort(),
    );
    // The custom roles exist before any binding names them (the binding takes the role's name output).
    for (const b of run.ofType('gcp:storage/bucketIAMMember:BucketIAMMember')) {
      const role = storageRoles.filter((r) => r.state.name === b.inputs.role);
      expect(missingBefore(run, b, role), b.name).toEqual([]);
    }
  });

  it('follows tessera:sourcePrefix: the source grants move with it, and the default prefix is no longer granted', async () => {
    const moved = await runStack(STACK, { ...BASE, 'tessera:sourcePrefix': 'incoming/' });
    const sources = moved.one('gcp:storage/bucket:Bucket', '-sources').state.name as string;
    const ingest = memberOf(moved, 'ingest');
    expect([...granted(moved, ingest, sources, keyIn('source', 'incoming/'))].sort()).toEqual([
      'storage.objects.create',
      'storage.objects.get',
    ]);
    expect([...granted(moved, memberOf(moved, 'scene'), sources, keyIn('source', 'incoming/'))]).toEqual(['storage.objects.get']);
    for (const role of FUNCTION_ROLES)
      expect([...granted(moved, memberOf(moved, role), sources, keyIn('source', DEFAULT_SOURCE_PREFIX))], role).toEqual([]);
  });

  it('gives verify an account of its own, which no function runs as, exported for impersonation', () => {
    const verify = run.one('gcp:serviceaccount/account:Account', '-verify');
    expect(verify.inputs.accountId).toBe('ts-gcp-europe-west1-verify');
    for (const fn of run.ofType(FN)) expect(serviceConfig(fn).serviceAccountEmail, fn.name).not.toBe(verify.state.email);
    expect(run.outputs.verifyServiceAccount).toBe(verify.state.email);
    // Its taps: subscriptions of its own, created, read and deleted under a custom role holding only that.
    const taps = run.one('gcp:projects/iAMCustomRole:IAMCustomRole', '-verify-taps');
    expect((taps.inputs.permissions as string[]).sort()).toEqual([...VERIFY_TAP_PERMISSIONS].sort());
    expect(run.one('gcp:projects/iAMMember:IAMMember', '-verify-taps').inputs).toMatchObject({
      role: taps.state.name,
      member: verify.state.member,
    });
  });
});

describe('the GCP stack with tessera:telemetry (OpenTelemetry export, docs/telemetry.md)', () => {
  interface ServiceConfig {
    readonly environmentVariables: unknown;
    readonly secretEnvironmentVariables?: unknown;
  }
  const config = (fn: RecordedResource) => reveal(fn.inputs.serviceConfig).value as ServiceConfig;
  const telemetryVars = (fn: RecordedResource) =>
    Object.fromEntries(Object.entries(envOf(config(fn).environmentVariables)).filter(([k]) => k.startsWith('OTEL_')));
  const names = (run: StackRun) =>
    run.resources
      .filter((r) => r.custom)
      .map((r) => `${r.type} ${r.name}`)
      .sort();
  const grantsOf = (run: StackRun) =>
    [
      ...run.ofType('gcp:projects/iAMMember:IAMMember'),
      ...run.ofType('gcp:secretmanager/secretIamMember:SecretIamMember'),
      ...run.ofType('gcp:storage/bucketIAMMember:BucketIAMMember'),
      ...run.ofType('gcp:pubsub/topicIAMMember:TopicIAMMember'),
      ...run.ofType('gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember'),
    ]
      .map((g) => `${g.type} ${g.name} ${String(g.inputs.role)} ${String(g.inputs.member)}`)
      .sort();
  const HEADER_KEY = 'key-5be1d0c7-otlp';
  let off: StackRun;

  it('is off unless set: no OTEL_* variable, no API, no grant and no resource for it, the same stack as `off`', async () => {
    off = await runStack(STACK, BASE);
    const explicit = await runStack(STACK, { ...BASE, 'tessera:telemetry': 'off' });
    for (const run of [off, explicit]) {
      for (const fn of functions(run)) expect(telemetryVars(fn), fn.name).toEqual({});
      const services = run.ofType('gcp:projects/service:Service').map((x) => x.inputs.service);
      expect(services).not.toContain('telemetry.googleapis.com');
      const projectRoles = run.ofType('gcp:projects/iAMMember:IAMMember').map((m) => String(m.inputs.role));
      expect(projectRoles.filter((r) => (GCP_TELEMETRY_ROLES as readonly string[]).includes(r))).toEqual([]);
    }
    expect(names(explicit)).toEqual(names(off));
    expect(functions(explicit).map((fn) => fn.inputs)).toEqual(functions(off).map((fn) => fn.inputs));
  });

  it("cloud: OTLP to the Telemetry API from every function, the API enabled, each function's account granted Cloud Trace Agent and Monitoring Metric Writer, nothing else", async () => {
    const run = await runStack(STACK, { ...BASE, 'tessera:telemetry': 'cloud' });
    expect(functions(run)).toHaveLength(6);
    for (const fn of functions(run)) {
      expect(telemetryVars(fn), fn.name).toEqual({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://telemetry.googleapis.com',
        OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${STACK},gcp.project_id=${PROJECT}`,
      });
      expect(config(fn).secretEnvironmentVariables, fn.name).toBeUndefined();
    }
    const telemetryApi = run.ofType('gcp:projects/service:Service').filter((x) => x.inputs.service === 'telemetry.googleapis.com');
    expect(telemetryApi).toHaveLength(1);
    const added = run
      .ofType('gcp:projects/iAMMember:IAMMember')
      .filter((m) => (GCP_TELEMETRY_ROLES as readonly string[]).includes(String(m.inputs.role)));
    const wanted = (Object.keys(GCP_ENTRY_POINTS) as (keyof typeof GCP_ENTRY_POINTS)[]).flatMap((role) =>
      GCP_TELEMETRY_ROLES.map((r) => `${r} ${String(byName(run, `-${role}`).state.member)}`),
    );
    expect(added.map((m) => `${String(m.inputs.role)} ${String(m.inputs.member)}`).sort()).toEqual(wanted.sort());
    expect(added.every((m) => m.inputs.project === PROJECT)).toBe(true);
    // Each function after its account's grants and their propagation, and after the API.
    const wait = run.one('time:index/sleep:Sleep', '-iam-propagation');
    for (const role of Object.keys(GCP_ENTRY_POINTS) as (keyof typeof GCP_ENTRY_POINTS)[]) {
      const mine = added.filter((m) => m.inputs.member === byName(run, `-${role}`).state.member);
      expect(missingBefore(run, byRole(run, role), [...mine, wait, ...telemetryApi])).toEqual([]);
    }
    // Exactly those grants and the API more than a stack without telemetry.
    expect(grantsOf(run).filter((g) => !grantsOf(off).includes(g))).toEqual(
      added.map((g) => `${g.type} ${g.name} ${String(g.inputs.role)} ${String(g.inputs.member)}`).sort(),
    );
    expect(names(run).filter((n) => !names(off).includes(n))).toEqual([...added, ...telemetryApi].map((r) => `${r.type} ${r.name}`).sort());
  });

  it('otlp: the endpoint in every function, its headers only in Secret Manager, filled in by the platform, each account granted that one secret', async () => {
    const run = await runStack(STACK, {
      ...BASE,
      'tessera:telemetry': '{"exporter":"otlp","endpoint":"https://otlp.example.com","sampling":0.5}',
      'tessera:telemetryHeaders': `x-api-key=${HEADER_KEY}`,
    });
    const secret = run.one('gcp:secretmanager/secret:Secret', '-otel-headers');
    const version = run.one('gcp:secretmanager/secretVersion:SecretVersion', '-otel-headers');
    expect(reveal(version.inputs.secretData)).toEqual({ secret: true, value: `x-api-key=${HEADER_KEY}` });
    expect(secret.inputs).toMatchObject({
      project: PROJECT,
      secretId: `tessera-${STACK}-otel-headers`,
      replication: { userManaged: { replicas: [{ location: 'europe-west1' }] } },
    });
    const holders = run.resources.filter((r) => JSON.stringify([r.inputs, r.state]).includes(HEADER_KEY));
    expect(holders.map((r) => r.type)).toEqual(['gcp:secretmanager/secretVersion:SecretVersion']);
    const readers = run.ofType('gcp:secretmanager/secretIamMember:SecretIamMember');
    expect(readers.map((g) => [g.inputs.secretId, g.inputs.role, g.inputs.member]).sort()).toEqual(
      (Object.keys(GCP_ENTRY_POINTS) as (keyof typeof GCP_ENTRY_POINTS)[])
        .map((role) => [secret.inputs.secretId, 'roles/secretmanager.secretAccessor', byName(run, `-${role}`).state.member])
        .sort(),
    );
    const wait = run.one('time:index/sleep:Sleep', '-iam-propagation');
    for (const fn of functions(run)) {
      expect(telemetryVars(fn), fn.name).toEqual({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example.com',
        OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${STACK}`,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.5',
      });
      expect(config(fn).secretEnvironmentVariables, fn.name).toEqual([
        { key: 'OTEL_EXPORTER_OTLP_HEADERS', projectId: PROJECT, secret: secret.inputs.secretId, version: version.state.version },
      ]);
      const mine = readers.find(
        (g) =>
          g.inputs.member === byName(run, `-${Object.entries(GCP_ENTRY_POINTS).find(([, e]) => e === entryPoint(fn))?.[0]}`).state.member,
      );
      expect(mine, fn.name).toBeDefined();
      expect(missingBefore(run, fn, [mine as RecordedResource, wait, version])).toEqual([]);
    }
    expect(run.ofType('gcp:projects/service:Service').map((x) => x.inputs.service)).toContain('secretmanager.googleapis.com');
    expect(names(run).filter((n) => !names(off).includes(n))).toEqual(
      [
        secret,
        version,
        ...readers,
        ...run.ofType('gcp:projects/service:Service').filter((x) => x.inputs.service === 'secretmanager.googleapis.com'),
      ]
        .map((r) => `${r.type} ${r.name}`)
        .sort(),
    );
    // With the PostGIS sink as well: the tile function gets both secret variables.
    const both = await runStack(STACK, {
      ...BASE,
      'tessera:telemetry': '{"exporter":"otlp","endpoint":"https://otlp.example.com"}',
      'tessera:telemetryHeaders': `x-api-key=${HEADER_KEY}`,
      'tessera:featureSinkUrl': 'postgis://u:p@10.0.0.5:5432/gis',
    });
    expect((config(byRole(both, 'tile')).secretEnvironmentVariables as { key: string }[]).map((v) => v.key)).toEqual([
      ENV.featureSink,
      'OTEL_EXPORTER_OTLP_HEADERS',
    ]);
    expect(both.ofType('gcp:projects/service:Service').filter((x) => x.inputs.service === 'secretmanager.googleapis.com')).toHaveLength(1);
  });
});
