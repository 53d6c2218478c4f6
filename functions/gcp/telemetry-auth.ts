import type { OtlpHeaderSource } from '../otel/otlp-headers.js';

/** Google's Telemetry (OTLP) API: traces to Cloud Trace, metrics to Cloud Monitoring (docs/telemetry.md). */
export const GOOGLE_TELEMETRY_HOST = 'telemetry.googleapis.com';

const hostOf = (url: string): string | undefined => {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
};

/**
 * The OTLP headers of a GCP function: when every OTLP endpoint the environment names is Google's Telemetry API, the
 * function's own credentials (`Authorization: Bearer <token>`, from its service account, renewed by the auth library
 * before it expires), looked up before each export. Undefined otherwise: a token is never sent anywhere but Google.
 *
 * @param requestHeaders the auth client's request headers (a Storage client's `authClient.getRequestHeaders`).
 */
export function googleTelemetryHeaders(
  env: Readonly<Record<string, string | undefined>>,
  requestHeaders: () => Promise<unknown>,
): OtlpHeaderSource | undefined {
  const endpoints = [
    env.OTEL_EXPORTER_OTLP_ENDPOINT,
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
  ].filter((e): e is string => e !== undefined && e.trim() !== '');
  if (endpoints.length === 0 || !endpoints.every((e) => hostOf(e) === GOOGLE_TELEMETRY_HOST)) return undefined;
  return async () => {
    const headers = await requestHeaders();
    // google-auth-library 10 answers a Fetch Headers object, 9 (the Storage client's) a plain record.
    if (headers instanceof Headers) return Object.fromEntries(headers.entries());
    return Object.fromEntries(Object.entries((headers ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  };
}
