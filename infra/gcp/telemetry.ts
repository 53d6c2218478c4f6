import * as projects from '@pulumi/gcp/projects';
import * as secretmanager from '@pulumi/gcp/secretmanager';
import * as pulumi from '@pulumi/pulumi';
import { FUNCTION_ROLES, type FunctionRole, type GcpStackConfig } from '../common/config.js';
import { slug } from '../common/naming.js';
import { otelEnvironment } from '../common/telemetry.js';

/**
 * The GCP side of `tessera:telemetry` (infra/common/telemetry.ts, docs/telemetry.md): what each function gets when
 * the stack exports OpenTelemetry, and nothing at all when it does not.
 *
 * - `cloud`: OTLP straight to Google's Telemetry API (traces to Cloud Trace, metrics to Cloud Monitoring), the API
 *   enabled, each function's service account granted Cloud Trace Agent and Monitoring Metric Writer on the project.
 *   The function adds its own OAuth token to each export (functions/gcp/telemetry-auth.ts); the Telemetry API needs
 *   the project as the resource attribute `gcp.project_id`.
 * - `otlp`: the endpoint; headers (an API key) go to Secret Manager, and the platform fills OTEL_EXPORTER_OTLP_HEADERS
 *   from it when an instance starts (serviceConfig.secretEnvironmentVariables), each account granted that one secret.
 */

export const GCP_TELEMETRY_SERVICE = 'telemetry.googleapis.com';
export const GCP_TELEMETRY_ENDPOINT = `https://${GCP_TELEMETRY_SERVICE}`;
/** What a function's account needs to write traces and metrics through the Telemetry API. */
export const GCP_TELEMETRY_ROLES = ['roles/cloudtrace.agent', 'roles/monitoring.metricWriter'] as const;
/** Where the platform puts the OTLP headers from Secret Manager (the variable the SDK's exporters read). */
export const OTLP_HEADERS_VARIABLE = 'OTEL_EXPORTER_OTLP_HEADERS';
const SECRET_MANAGER_SERVICE = 'secretmanager.googleapis.com';

/** The APIs `cfg.telemetry` needs enabled, for the stack's list: none when off. */
export function gcpTelemetryServices(cfg: GcpStackConfig): string[] {
  const t = cfg.telemetry;
  if (t.exporter === 'cloud') return [GCP_TELEMETRY_SERVICE];
  if (t.exporter === 'otlp' && t.headers !== undefined) return [SECRET_MANAGER_SERVICE];
  return [];
}

/** One `serviceConfig.secretEnvironmentVariables` entry. */
export interface SecretEnvironmentVariable {
  readonly key: string;
  readonly projectId: pulumi.Input<string>;
  readonly secret: pulumi.Input<string>;
  readonly version: pulumi.Input<string>;
}

export interface GcpTelemetry {
  /** What every function adds to its environment variables; {} when off. */
  readonly environment: Readonly<Record<string, pulumi.Input<string>>>;
  /** What every function adds to its secret environment variables (the OTLP headers); [] otherwise. */
  readonly secretEnvironment: readonly SecretEnvironmentVariable[];
  /** The grants to the functions' accounts: a function is created after them (and their propagation). */
  readonly grants: readonly pulumi.Resource[];
}

/** Declare what `cfg.telemetry` asks for on GCP, under `owner`. */
export function gcpTelemetry(
  owner: pulumi.Resource,
  name: string,
  cfg: GcpStackConfig,
  at: {
    /** Each function's service account, as an IAM member. */
    readonly member: (role: FunctionRole) => pulumi.Input<string>;
    readonly labels: Record<string, string>;
    /** Options of a resource that needs the stack's APIs enabled first. */
    readonly afterApis: pulumi.CustomResourceOptions;
  },
): GcpTelemetry {
  const t = cfg.telemetry;
  const project = cfg.project;
  switch (t.exporter) {
    case 'off':
      return { environment: {}, secretEnvironment: [], grants: [] };
    case 'cloud': {
      const grants = FUNCTION_ROLES.flatMap((role) =>
        GCP_TELEMETRY_ROLES.map(
          (r) =>
            new projects.IAMMember(
              `${name}-${role}-${r.split('/')[1]?.split('.')[0]}`,
              { project, role: r, member: at.member(role) },
              at.afterApis,
            ),
        ),
      );
      return {
        environment: otelEnvironment(t, cfg.stack, GCP_TELEMETRY_ENDPOINT, { 'gcp.project_id': project }),
        secretEnvironment: [],
        grants,
      };
    }
    case 'otlp': {
      if (t.headers === undefined) return { environment: otelEnvironment(t, cfg.stack, t.endpoint), secretEnvironment: [], grants: [] };
      const secret = new secretmanager.Secret(
        `${name}-otel-headers`,
        {
          project,
          secretId: `tessera-${slug(cfg.stack)}-otel-headers`,
          // In the stack's region only, as the sink URL.
          replication: { userManaged: { replicas: [{ location: cfg.region }] } },
          labels: at.labels,
        },
        at.afterApis,
      );
      const version = new secretmanager.SecretVersion(
        `${name}-otel-headers`,
        { secret: secret.id, secretData: pulumi.secret(t.headers) },
        { parent: owner },
      );
      const grants = FUNCTION_ROLES.map(
        (role) =>
          new secretmanager.SecretIamMember(
            `${name}-${role}-otel-headers-reader`,
            { project, secretId: secret.secretId, role: 'roles/secretmanager.secretAccessor', member: at.member(role) },
            { parent: owner },
          ),
      );
      return {
        environment: otelEnvironment(t, cfg.stack, t.endpoint),
        secretEnvironment: [{ key: OTLP_HEADERS_VARIABLE, projectId: project, secret: secret.secretId, version: version.version }],
        grants,
      };
    }
  }
}
