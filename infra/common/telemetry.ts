import type * as pulumi from '@pulumi/pulumi';

/**
 * `tessera:telemetry`: where the functions export their OpenTelemetry traces and metrics (docs/telemetry.md). Off
 * unless set: with it off the stack declares no telemetry resource, grants nothing for it and sets no OTEL_* variable,
 * so the functions never load the SDK (functions/otel/otel-sdk.ts).
 *
 * - `cloud`: the cloud's own tracing and metrics services. AWS: the ADOT collector layer on every function,
 *   traces to X-Ray and metrics to CloudWatch (EMF); GCP: the Telemetry (OTLP) API, traces to Cloud Trace and metrics
 *   to Cloud Monitoring; Azure: Azure Monitor, traces and metrics to the stack's Application Insights component
 *   (Microsoft's distro in the app: whole-percent sampling, so `sampling` is at least 0.01 there).
 * - `otlp`: any OTLP/HTTP receiver at `endpoint` (a collector, a vendor's gateway), with optional headers
 *   (`tessera:telemetryHeaders`, a secret: kept in the cloud's secret store, never in a function setting).
 * - `sampling`: the share of deliveries traced (0 < sampling <= 1; default 1, every delivery). Metrics are never sampled.
 */
export type TelemetryConfig =
  | { readonly exporter: 'off' }
  | {
      readonly exporter: 'cloud';
      readonly sampling: number | undefined;
      /** AWS: the ADOT collector layer to use instead of {@link adotCollectorLayerArn}'s (a region it names no version for, a newer one). */
      readonly collectorLayerArn: string | undefined;
    }
  | {
      readonly exporter: 'otlp';
      /** The OTLP/HTTP base URL: the SDK posts to `<endpoint>/v1/traces` and `<endpoint>/v1/metrics`. */
      readonly endpoint: string;
      readonly sampling: number | undefined;
      /** OTEL_EXPORTER_OTLP_HEADERS' format (`key=value,key2=value2`); a secret. */
      readonly headers: pulumi.Input<string> | undefined;
    };

export const TELEMETRY_OFF: TelemetryConfig = { exporter: 'off' };

/** The settings this file reads. */
type TelemetryKey = 'telemetry' | 'telemetryHeaders';

/**
 * How a problem names a setting and says how to set it: the part of config.ts's SettingsDialect used here (a stack
 * file's `tessera:telemetry`, a component's `telemetry` arg). Declared here so config.ts imports this file, not both ways.
 */
export interface TelemetryDialect {
  name(key: TelemetryKey): string;
  set(key: TelemetryKey, example: string): string;
  setSecret(key: TelemetryKey, placeholder: string): string;
}

export const TELEMETRY_EXPORTERS = ['off', 'cloud', 'otlp'] as const;
export type TelemetryExporter = (typeof TELEMETRY_EXPORTERS)[number];

/** The fields `tessera:telemetry` takes as JSON, and the exporters each applies to. */
const FIELDS = {
  exporter: TELEMETRY_EXPORTERS,
  endpoint: ['otlp'],
  sampling: ['cloud', 'otlp'],
  collectorLayerArn: ['cloud'],
} as const satisfies Record<string, readonly TelemetryExporter[]>;

export const TELEMETRY_CONFIG_DOC =
  'optional OpenTelemetry export of traces and metrics (docs/telemetry.md): off (default), cloud (AWS: ADOT layer to X-Ray/CloudWatch; GCP: Cloud Trace/Cloud Monitoring; Azure: Application Insights), or JSON {"exporter":"otlp","endpoint":"https://collector:4318","sampling":0.1}';
export const TELEMETRY_HEADERS_DOC =
  "optional headers of the otlp exporter (key=value,...; an API key): set it as a secret, `pulumi config set --secret tessera:telemetryHeaders ...`; the stack keeps it in the cloud's secret store";

/** OTEL_EXPORTER_OTLP_HEADERS' format: comma-separated `key=value`, keys as HTTP header names, values percent-encoded. */
const HEADERS = /^\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+\s*=[^,]*(,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+\s*=[^,]*)*$/;

/**
 * Parse `tessera:telemetry` (a word, or JSON) and `tessera:telemetryHeaders` into a {@link TelemetryConfig}, pushing
 * each problem, named as the reader writes it (`dialect`), onto `problems`. Never echoes the headers: they hold a key.
 */
export function parseTelemetry(
  text: string | undefined,
  headers: pulumi.Input<string> | undefined,
  cloud: 'aws' | 'gcp' | 'azure' | undefined,
  dialect: TelemetryDialect,
  problems: string[],
): TelemetryConfig {
  const key = (k: TelemetryKey) => dialect.name(k);
  const example = `'{"exporter":"otlp","endpoint":"https://collector.example.com:4318"}'`;
  let fields: Record<string, unknown>;
  const word = text?.trim();
  if (word === undefined || word === '') fields = { exporter: 'off' };
  else if ((TELEMETRY_EXPORTERS as readonly string[]).includes(word)) fields = { exporter: word };
  else {
    try {
      const parsed: unknown = JSON.parse(word);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      fields = parsed as Record<string, unknown>;
    } catch {
      problems.push(
        `${key('telemetry')} must be ${TELEMETRY_EXPORTERS.join(', ')}, or JSON with an exporter and its settings; got ${JSON.stringify(word)}; e.g. \`${dialect.set('telemetry', example)}\``,
      );
      return TELEMETRY_OFF;
    }
  }
  const before = problems.length;
  const exporter = fields.exporter ?? 'off';
  if (typeof exporter !== 'string' || !(TELEMETRY_EXPORTERS as readonly string[]).includes(exporter)) {
    problems.push(`${key('telemetry')}: exporter must be one of ${TELEMETRY_EXPORTERS.join(', ')}, got ${JSON.stringify(exporter)}`);
    return TELEMETRY_OFF;
  }
  const chosen = exporter as TelemetryExporter;
  for (const [name, value] of Object.entries(fields)) {
    const applies = (FIELDS as Record<string, readonly TelemetryExporter[]>)[name];
    if (applies === undefined)
      problems.push(`${key('telemetry')}: ${JSON.stringify(name)} is not a telemetry setting (known: ${Object.keys(FIELDS).join(', ')})`);
    else if (!applies.includes(chosen) && value !== undefined)
      problems.push(`${key('telemetry')}: ${name} applies to the ${applies.join(' and ')} exporter only, not ${chosen}; remove it`);
  }
  const sampling = fields.sampling;
  if (sampling !== undefined && (typeof sampling !== 'number' || !(sampling > 0 && sampling <= 1)))
    problems.push(
      `${key('telemetry')}: sampling is the share of deliveries traced, a number above 0 and at most 1 (e.g. 0.1), got ${JSON.stringify(sampling)}`,
    );
  const hasHeaders = headers !== undefined && !(typeof headers === 'string' && headers.trim() === '');
  if (hasHeaders && chosen !== 'otlp')
    problems.push(
      `${key('telemetryHeaders')} is for the otlp exporter only (the ${chosen === 'cloud' ? "cloud's services authenticate the function's own identity, or on Azure the stack's Application Insights connection string" : 'telemetry is off'}); remove it`,
    );
  if (typeof headers === 'string' && hasHeaders && !HEADERS.test(headers))
    problems.push(
      `${key('telemetryHeaders')} must be key=value pairs separated by commas, as OTEL_EXPORTER_OTLP_HEADERS takes them; set it with \`${dialect.setSecret('telemetryHeaders', "'x-api-key=<key>'")}\``,
    );

  switch (chosen) {
    case 'off':
      return TELEMETRY_OFF;
    case 'cloud': {
      // Application Insights samples in whole percent (its sampler rounds the ratio): below 1 % it keeps nothing or rounds.
      if (cloud === 'azure' && typeof sampling === 'number' && sampling > 0 && sampling < 0.01)
        problems.push(
          `${key('telemetry')}: on Azure the cloud exporter samples in whole percent (Application Insights), so sampling is at least 0.01, got ${JSON.stringify(sampling)}`,
        );
      const layer = fields.collectorLayerArn;
      if (
        layer !== undefined &&
        (typeof layer !== 'string' || !/^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$/.test(layer))
      )
        problems.push(
          `${key('telemetry')}: collectorLayerArn must be a Lambda layer version ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<version>), got ${JSON.stringify(layer)}`,
        );
      if (layer !== undefined && cloud !== undefined && cloud !== 'aws')
        problems.push(`${key('telemetry')}: collectorLayerArn is for AWS stacks only; remove it`);
      if (problems.length > before) return TELEMETRY_OFF;
      return { exporter: 'cloud', sampling: sampling as number | undefined, collectorLayerArn: layer as string | undefined };
    }
    case 'otlp': {
      const endpoint = fields.endpoint;
      let url: URL | undefined;
      try {
        url = typeof endpoint === 'string' ? new URL(endpoint) : undefined;
      } catch {
        url = undefined;
      }
      if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.search !== '' || url.hash !== '')
        problems.push(
          `${key('telemetry')}: the otlp exporter needs an endpoint, the http(s) base URL of an OTLP/HTTP receiver (the SDK adds /v1/traces and /v1/metrics), got ${JSON.stringify(endpoint)}; e.g. \`${dialect.set('telemetry', example)}\``,
        );
      else if (url.username !== '' || url.password !== '')
        problems.push(
          `${key('telemetry')}: the endpoint must not carry credentials (they would sit in every function's settings); put them in ${key('telemetryHeaders')} as a secret`,
        );
      if (problems.length > before || typeof endpoint !== 'string') return TELEMETRY_OFF;
      return {
        exporter: 'otlp',
        endpoint: endpoint.replace(/\/+$/, ''),
        sampling: sampling as number | undefined,
        headers: hasHeaders ? headers : undefined,
      };
    }
    default:
      return TELEMETRY_OFF;
  }
}

/**
 * The OTEL_* variables every function of an exporting stack gets, whatever the cloud: the OTLP endpoint (none for an
 * exporter that is not OTLP: Azure Monitor's), the sampler (when sampling is below 1) and the resource attributes
 * naming the stack (`deployment.environment.name`), plus `extraAttributes`. Empty when telemetry is off.
 */
export function otelEnvironment(
  telemetry: TelemetryConfig,
  stack: string,
  endpoint: string | undefined,
  extraAttributes: Readonly<Record<string, string>> = {},
): Record<string, string> {
  if (telemetry.exporter === 'off') return {};
  const attributes = { 'deployment.environment.name': stack, ...extraAttributes };
  return {
    ...(endpoint === undefined ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }),
    // The spec's format: comma-separated key=value, values percent-encoded.
    OTEL_RESOURCE_ATTRIBUTES: Object.entries(attributes)
      .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
      .join(','),
    ...(telemetry.sampling !== undefined && telemetry.sampling < 1
      ? { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(telemetry.sampling) }
      : {}),
  };
}
