import { afterAll, describe, expect, inject, it } from 'vitest';
import { PubSubDeadLetterTopic } from '../../functions/gcp/adapters/pubsub-dead-letter-topic.js';
import { PubSubJobQueue, TILE_TOPIC_BATCHING } from '../../functions/gcp/adapters/pubsub-job-queue.js';
import { AdapterError } from '../../shared/domain/errors.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';
import { pubsubClient, pullAll } from './clients.js';

const gcp = requireEndpoints(inject('emulators'), 'gcp');
const pubsub = pubsubClient(gcp);
afterAll(() => pubsub.close());

async function topicWithSubscription() {
  const name = `q-${freshJobId().slice(0, 10)}`;
  const [topic] = await pubsub.createTopic(name);
  const [sub] = await topic.createSubscription(`${name}-sub`);
  return { topic: pubsub.topic(name, { batching: TILE_TOPIC_BATCHING }), sub: sub.name };
}

describe('PubSubJobQueue against the Pub/Sub emulator', () => {
  it('publishes a batch of 2,500 tile messages, each body intact with its jobKey attribute', async () => {
    const { topic, sub } = await topicWithSubscription();
    const messages = Array.from({ length: 2500 }, (_, i) => ({ jobKey: freshJobId(`k${i}`), body: JSON.stringify({ v: 1, i }) }));
    await new PubSubJobQueue(topic).sendBatch(messages);
    const pulled = await pullAll(pubsub, sub, 3000);
    expect(pulled).toHaveLength(2500);
    const byKey = new Map(pulled.map((m) => [m.attributes.jobKey, m.text]));
    for (const m of messages) expect(byKey.get(m.jobKey)).toBe(m.body);
  });

  it('throws a retryable AdapterError naming the topic when Pub/Sub refuses the publish', async () => {
    const missing = pubsub.topic(`missing-${freshJobId().slice(0, 10)}`, { batching: TILE_TOPIC_BATCHING });
    const send = new PubSubJobQueue(missing).sendBatch([{ jobKey: 'k', body: '{}' }]);
    await expect(send).rejects.toBeInstanceOf(AdapterError);
    await expect(send).rejects.toMatchObject({ retryable: true, message: expect.stringContaining(missing.name) });
  });

  it('refuses a message without a job key before publishing anything', async () => {
    const { topic, sub } = await topicWithSubscription();
    const send = new PubSubJobQueue(topic).sendBatch([
      { jobKey: 'k1', body: '{}' },
      { jobKey: '', body: '{}' },
    ]);
    await expect(send).rejects.toThrow(/has no job key/);
    expect(await pullAll(pubsub, sub)).toEqual([]);
  });
});

describe('PubSubDeadLetterTopic', () => {
  it('keeps the original bytes and attributes and adds why', async () => {
    const { topic, sub } = await topicWithSubscription();
    const data = Buffer.from([0, 1, 2, 255]);
    await new PubSubDeadLetterTopic(topic).send({
      data,
      reason: 'INVALID_EVENT',
      error: 'x'.repeat(5000),
      messageId: 'm-1',
      attributes: { jobKey: 'k' },
    });
    const [letter] = await pullAll(pubsub, sub);
    expect(letter?.data).toEqual(data);
    expect(letter?.attributes).toMatchObject({ jobKey: 'k', 'tessera-reason': 'INVALID_EVENT', 'tessera-message-id': 'm-1' });
    expect(Buffer.byteLength(letter?.attributes['tessera-error'] ?? '')).toBeLessThanOrEqual(1024); // Pub/Sub's attribute limit
  });

  it('throws a retryable AdapterError when the dead-letter topic is missing, so the message is retried, not lost', async () => {
    const missing = new PubSubDeadLetterTopic(pubsub.topic(`missing-${freshJobId().slice(0, 10)}`));
    await expect(missing.send({ data: Buffer.from('x'), reason: 'INVALID_EVENT', error: 'bad', messageId: 'm-2' })).rejects.toMatchObject({
      retryable: true,
      message: expect.stringMatching(/could not publish poison message m-2/),
    });
  });
});
