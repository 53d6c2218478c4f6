import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { GOOGLE_TELEMETRY_HOST, googleTelemetryHeaders } from '../../../functions/gcp/telemetry-auth.js';
import { parseOtlpHeaders } from '../../../functions/otel/otel-env.js';
import { HeaderedSpanExporter } from '../../../functions/otel/otlp-headers.js';
import { startOtlpReceiver } from '../../support/otel-trace.js';

/** One finished span, as the SDK hands an exporter. */
function span(name: string): ReadableSpan {
  const t: [number, number] = [1_800_000_000, 0];
  return {
    name,
    kind: SpanKind.INTERNAL,
    spanContext: () => ({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1 }),
    startTime: t,
    endTime: t,
    status: { code: SpanStatusCode.OK },
    attributes: {},
    links: [],
    events: [],
    duration: [0, 0],
    ended: true,
    resource: resourceFromAttributes({ 'service.name': 'test' }),
    instrumentationScope: { name: 'tessera' },
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

const exportOnce = (exporter: HeaderedSpanExporter, name: string) =>
  new Promise<{ code: number; error?: Error }>((resolve) => exporter.export([span(name)], resolve));

const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
afterEach(() => {
  if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved;
});

describe('OTLP headers looked up per export (functions/otel/otlp-headers.ts)', () => {
  it('parses OTEL_EXPORTER_OTLP_HEADERS text, percent-decoding values, and names only the position of a bad pair', () => {
    expect(parseOtlpHeaders('x-api-key=k%3D1, x-team = tiles ,')).toEqual({ 'x-api-key': 'k=1', 'x-team': 'tiles' });
    expect(() => parseOtlpHeaders('a=1,secret-value')).toThrow(/^OTLP headers: pair 2 is not key=value$/);
  });

  it('sends each export with the headers of that moment (a renewed token), and fails an export whose headers cannot be had, sending nothing', async () => {
    const receiver = await startOtlpReceiver();
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
    const tokens = ['Bearer one', 'Bearer one', 'Bearer two'];
    let calls = 0;
    const exporter = new HeaderedSpanExporter(async () => {
      const token = tokens[calls++];
      if (token === undefined) throw new Error('no credentials');
      return { authorization: token };
    });
    try {
      for (const name of ['a', 'b', 'c']) expect(await exportOnce(exporter, name)).toEqual({ code: 0 });
      expect(receiver.requests.map((r) => [r.path, r.headers.authorization])).toEqual([
        ['/v1/traces', 'Bearer one'],
        ['/v1/traces', 'Bearer one'],
        ['/v1/traces', 'Bearer two'],
      ]);
      const failed = await exportOnce(exporter, 'd');
      expect(failed.code).toBe(1);
      expect(failed.error?.message).toBe('no credentials');
      expect(receiver.requests).toHaveLength(3);
    } finally {
      await exporter.shutdown();
      await receiver.close();
    }
  });

  it("adds a GCP function's Google credentials only when every OTLP endpoint is Google's Telemetry API", async () => {
    const token = async () => new Headers({ authorization: 'Bearer g' });
    const google = `https://${GOOGLE_TELEMETRY_HOST}`;
    expect(googleTelemetryHeaders({}, token)).toBeUndefined();
    expect(googleTelemetryHeaders({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example.com' }, token)).toBeUndefined();
    // A token must never reach another receiver: traces to Google, metrics elsewhere, is none at all.
    expect(
      googleTelemetryHeaders(
        { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${google}/v1/traces`, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'https://m.example.com' },
        token,
      ),
    ).toBeUndefined();
    expect(googleTelemetryHeaders({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://telemetry.googleapis.com.example.com' }, token)).toBeUndefined();
    expect(await googleTelemetryHeaders({ OTEL_EXPORTER_OTLP_ENDPOINT: google }, token)?.()).toEqual({ authorization: 'Bearer g' });
    // google-auth-library 9 (the Storage client's) answers a plain record.
    expect(await googleTelemetryHeaders({ OTEL_EXPORTER_OTLP_ENDPOINT: google }, async () => ({ Authorization: 'Bearer h' }))?.()).toEqual({
      Authorization: 'Bearer h',
    });
  });
});
