import * as iam from '@pulumi/aws/iam';
import * as secretsmanager from '@pulumi/aws/secretsmanager';
import * as pulumi from '@pulumi/pulumi';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { AwsStackConfig, FunctionRole } from '../common/config.js';
import { LAMBDA_ARCHITECTURE } from '../common/packaging.js';
import type { StandardTags } from '../common/tags.js';
import { otelEnvironment } from '../common/telemetry.js';

/**
 * The AWS side of `tessera:telemetry` (infra/common/telemetry.ts, docs/telemetry.md): what each Lambda function gets
 * when the stack exports OpenTelemetry, and nothing at all when it does not.
 *
 * - `cloud`: the ADOT collector layer (a Lambda extension) on every function. The SDK in the function sends OTLP to
 *   it on localhost:4318; the collector, configured from {@link COLLECTOR_CONFIG_VARIABLE} (its `env:` confmap
 *   provider), sends traces to X-Ray (`awsxray`) and metrics to CloudWatch as EMF lines on stdout (`awsemf`), which
 *   CloudWatch Logs turns into metrics of the namespace `Tessera/<stack>`. Each role gets X-Ray's two write actions.
 * - `otlp`: the endpoint as OTEL_EXPORTER_OTLP_ENDPOINT; headers (an API key) go to Secrets Manager, never into the
 *   environment: the function reads them at cold start (functions/aws/compose.ts), each role granted that one secret.
 */

/** The AWS account that publishes the ADOT Lambda layers. */
export const ADOT_LAYER_ACCOUNT = '901920570463';
/** The ADOT collector layer version pinned here (ADOT Collector for Lambda v0.117.0, layer version 1). */
export const ADOT_COLLECTOR_LAYER = { name: 'aws-otel-collector', version: 'ver-0-117-0', layerVersion: 1 } as const;

/** The ADOT collector layer's ARN in `region`, for the functions' architecture. */
export function adotCollectorLayerArn(region: string, architecture: string = LAMBDA_ARCHITECTURE): string {
  const arch = architecture === 'x86_64' ? 'amd64' : architecture;
  return `arn:aws:lambda:${region}:${ADOT_LAYER_ACCOUNT}:layer:${ADOT_COLLECTOR_LAYER.name}-${arch}-${ADOT_COLLECTOR_LAYER.version}:${ADOT_COLLECTOR_LAYER.layerVersion}`;
}

/** Where the ADOT collector extension receives OTLP/HTTP. */
export const ADOT_OTLP_ENDPOINT = 'http://localhost:4318';
/** The variable holding the collector's configuration; OPENTELEMETRY_COLLECTOR_CONFIG_URI points the extension at it. */
export const COLLECTOR_CONFIG_VARIABLE = 'TESSERA_OTEL_COLLECTOR_CONFIG';
/** The actions the `awsxray` exporter calls (the AWSXRayDaemonWriteAccess policy without its sampling reads: no X-Ray SDK samples here). */
export const XRAY_WRITE_ACTIONS = ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'] as const;

/**
 * The collector's configuration, as JSON (which YAML reads as is): OTLP/HTTP in on localhost, traces to X-Ray, metrics
 * as EMF on stdout. Stdout needs no grant: Lambda already ships the function's output (the extension's included) to
 * its log group, where CloudWatch extracts the metrics.
 */
export function adotCollectorConfig(stack: string): string {
  return JSON.stringify({
    receivers: { otlp: { protocols: { http: { endpoint: 'localhost:4318' } } } },
    exporters: {
      awsxray: {},
      awsemf: { namespace: `Tessera/${stack}`, output_destination: 'stdout' },
    },
    service: {
      pipelines: {
        traces: { receivers: ['otlp'], exporters: ['awsxray'] },
        metrics: { receivers: ['otlp'], exporters: ['awsemf'] },
      },
    },
  });
}

export interface AwsTelemetry {
  /** What every function adds to its environment: OTEL_* and the collector's or the headers secret's; {} when off. */
  readonly environment: Readonly<Record<string, pulumi.Input<string>>>;
  /** What every function adds to its arguments: the collector layer (`cloud`); {} otherwise. */
  readonly functionArgs: { readonly layers?: pulumi.Input<string>[] };
  /** Grant `role` what exporting needs, as an inline policy of its own beside the layout's: none when there is nothing to grant. */
  grant(role: FunctionRole, roleResource: iam.Role): iam.RolePolicy | undefined;
}

/** Declare what `cfg.telemetry` asks for on AWS, under `owner`. */
export function awsTelemetry(owner: pulumi.Resource, name: string, cfg: AwsStackConfig, tags: StandardTags): AwsTelemetry {
  const telemetry = cfg.telemetry;
  switch (telemetry.exporter) {
    case 'off':
      return { environment: {}, functionArgs: {}, grant: () => undefined };
    case 'cloud': {
      const layer = telemetry.collectorLayerArn ?? adotCollectorLayerArn(cfg.region);
      return {
        environment: {
          ...otelEnvironment(telemetry, cfg.stack, ADOT_OTLP_ENDPOINT),
          OPENTELEMETRY_COLLECTOR_CONFIG_URI: `env:${COLLECTOR_CONFIG_VARIABLE}`,
          [COLLECTOR_CONFIG_VARIABLE]: adotCollectorConfig(cfg.stack),
        },
        functionArgs: { layers: [layer] },
        grant: (role, roleResource) =>
          new iam.RolePolicy(
            `${name}-${role}-telemetry`,
            {
              role: roleResource.id,
              policy: JSON.stringify({
                Version: '2012-10-17',
                Statement: [{ Sid: 'XRayWrite', Effect: 'Allow', Action: [...XRAY_WRITE_ACTIONS], Resource: '*' }],
              }),
            },
            { parent: owner },
          ),
      };
    }
    case 'otlp': {
      const headers = telemetry.headers;
      const secret =
        headers === undefined
          ? undefined
          : new secretsmanager.Secret(
              `${name}-otel-headers`,
              { description: 'OTLP exporter headers of the Tessera functions (tessera:telemetryHeaders)', tags },
              { parent: owner },
            );
      const version =
        secret === undefined || headers === undefined
          ? undefined
          : new secretsmanager.SecretVersion(
              `${name}-otel-headers`,
              { secretId: secret.id, secretString: pulumi.secret(headers) },
              { parent: owner },
            );
      return {
        environment: {
          ...otelEnvironment(telemetry, cfg.stack, telemetry.endpoint),
          ...(secret && version ? { [ENV.otelHeadersSecret]: secret.arn, [ENV.otelHeadersSecretVersion]: version.versionId } : {}),
        },
        functionArgs: {},
        grant: (role, roleResource) =>
          secret === undefined
            ? undefined
            : new iam.RolePolicy(
                `${name}-${role}-telemetry`,
                {
                  role: roleResource.id,
                  policy: secret.arn.apply((arn) =>
                    JSON.stringify({
                      Version: '2012-10-17',
                      Statement: [{ Sid: 'OtlpHeaders', Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: arn }],
                    }),
                  ),
                },
                { parent: owner },
              ),
      };
    }
  }
}
