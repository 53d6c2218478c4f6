import type { DeadLetter, DeadLetterSink } from '../ports/job-queue.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';

/**
 * What became of a poison delivery. Poison is a message no retry can cure (it
 * does not parse, names bad parameters, its source is not a raster): the
 * verdict of shared/app/deliveries.ts, the same on every cloud.
 */
export type PoisonSettlement =
  /** One entry in the dead-letter queue: the trigger now acknowledges the delivery. */
  | { readonly kind: 'dead-lettered'; readonly sink: string }
  /**
   * No dead-letter queue is configured, or writing to it failed: the trigger
   * falls back to its transport's own path (fail the delivery; the transport's
   * count moves it), so the message is never lost.
   */
  | { readonly kind: 'fall-back'; readonly why: 'no-sink' | 'send-failed'; readonly error?: unknown };

/**
 * THE poison rule: settle at once, never retry as if transient. The trigger
 * writes the message to its transport's dead-letter queue itself and then
 * acknowledges it, so a poison scene or tile costs one delivery, not
 * maxReceiveCount of them (Azure: 5 deliveries 330 s apart). Per transport:
 *
 * | trigger | sink | then |
 * |---|---|---|
 * | SQS + Lambda | SendMessage to the queue's DLQ | the record is not in batchItemFailures: Lambda deletes it |
 * | Pub/Sub push | publish to the dead-letter topic | return normally: the push is acknowledged |
 * | Storage Queue + host | Put Message on `<queue>-poison` | return normally: the host deletes it |
 * | local pool / parity | PullQueue.deadLetter | (the queue moves it itself) |
 *
 * Ordering makes it lossless: the entry is written before the ack, so a crash
 * in between leaves the original in the queue (it comes back, is poison again,
 * and is written again: a duplicate entry, never a lost one).
 */
export async function settlePoison(sink: DeadLetterSink | undefined, letter: DeadLetter, telemetry: Telemetry): Promise<PoisonSettlement> {
  if (sink === undefined) {
    telemetry.log('WARN', 'poison-no-dead-letter-queue', {
      messageId: letter.messageId,
      reason: letter.reason,
      why: 'no dead-letter queue is configured (TESSERA_DEAD_LETTER_QUEUE): the transport moves it after its count instead',
    });
    return { kind: 'fall-back', why: 'no-sink' };
  }
  try {
    await sink.send(letter);
  } catch (error) {
    telemetry.log('ERROR', 'poison-dead-letter-failed', { messageId: letter.messageId, reason: letter.reason, sink: sink.name, error });
    return { kind: 'fall-back', why: 'send-failed', error };
  }
  telemetry.log('WARN', 'poison-dead-lettered', {
    messageId: letter.messageId,
    jobKey: letter.jobKey,
    reason: letter.reason,
    sink: sink.name,
  });
  return { kind: 'dead-lettered', sink: sink.name };
}

/** The reason code and text of a poison error, for a dead-letter entry. */
export function poisonReason(error: Error): Pick<DeadLetter, 'reason' | 'error'> {
  const code = (error as { code?: unknown }).code;
  return { reason: typeof code === 'string' ? code : 'undecodable', error: error.message };
}
