import { type Attributes, type Span, SpanStatusCode, trace } from '@opentelemetry/api';

/**
 * Spans of the tile path, through the OpenTelemetry API only (docs/telemetry.md).
 *
 * The core depends on `@opentelemetry/api` and on no SDK: the API is the package libraries instrument with, and
 * until a wiring file registers an SDK (functions/otel/otel-sdk.ts, only when `OTEL_*` variables ask for one) every call
 * here goes to the API's no-op tracer, which records nothing and allocates next to nothing (bench section
 * "tracing"). A port of our own would have re-made the API's context propagation and no-op default for no gain.
 *
 * The tracer is looked up per span, not once per module: a provider registered after this module loaded (every
 * wiring file, and a test that registers its own) is then used at once.
 */
const tracer = () => trace.getTracer('tessera');

/** Attribute names, one list: the test and docs/telemetry.md read the same names. */
export const SPAN_ATTR = {
  jobKey: 'tessera.job_key',
  claimId: 'tessera.claim_id',
  claimOwner: 'tessera.claim_owner',
  /** Epoch ms: when the claim's lease ends, as the claim (or the takeover) set it. */
  leaseDeadline: 'tessera.lease_deadline_ms',
  /** `<row>_<col>` of the tile's window in its scene grid. */
  tile: 'tessera.tile',
  outputKey: 'tessera.output_key',
  /** What happened: the tile outcome (`written`, `already-present`, `lease-stolen` ...) or the delivery verdict. */
  outcome: 'tessera.outcome',
  /** The delivery's verdict: `ack`, `retry` or `poison`. */
  verdict: 'tessera.verdict',
  /** Why a delivery is retried or poison. */
  error: 'tessera.error',
  deliveryId: 'messaging.message.id',
  receiveCount: 'messaging.message.delivery_count',
  messageKind: 'tessera.message_kind',
} as const;

/** Span names, one list (the same reason). */
export const SPAN = {
  delivery: 'tessera.delivery',
  tile: 'tessera.tile',
  claim: 'tessera.claim',
  read: 'tessera.read',
  render: 'tessera.render',
  write: 'tessera.write',
  commit: 'tessera.commit',
} as const;

/**
 * Run `fn` inside a new span, a child of the active one, and end it however `fn` ends. A throw marks the span
 * ERROR with the exception and is rethrown unchanged: the span records, it never decides.
 */
export function inSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>): Promise<T> {
  return tracer().startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}
